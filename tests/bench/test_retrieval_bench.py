"""The retrieval bench's memory figure is the measured process's own."""

from __future__ import annotations

import subprocess
import sys

from bench.retrieval import _peak_rss_mb


def test_a_side_reports_its_own_peak_not_its_parents():
    ballast = bytearray(600 << 20)  # this process peaks above 600 MB ...
    ballast[:: 1 << 12] = b"x" * len(ballast[:: 1 << 12])  # (touch every page so it is resident)
    assert _peak_rss_mb() > 600
    child = subprocess.run(
        [sys.executable, "-c", "from bench.retrieval import _peak_rss_mb; print(_peak_rss_mb())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert float(child.stdout) < 400  # ... a side it starts does not inherit that peak
