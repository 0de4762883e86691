"""How pytest-xdist's workers see the tests (tests/conftest.py): ``escaped_ids``, the test IDs
that workers could collect differently, which fail at setup with a message asking for explicit
ids; ``work_unit``, the groups of files ``--dist loadfile`` gives one worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import escaped_ids, work_unit

# As pytest writes them: a gzip member made at import time (its header stamps the current
# second, so two workers got two IDs and CI stopped), and a non-ASCII string.
STAMPED = (
    r"tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-\x1f\x8b\x08\x00]\xcf\x0bk-False]"
)
NON_ASCII = r"tests/unit/test_prophet_outputs.py::test_query_form_examples[S\xe3o Paulo-True]"
PLAIN = "tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-bytes-False]"


def test_ids_with_escaped_bytes_or_text_are_refused_and_plain_ones_pass():
    assert escaped_ids([STAMPED, PLAIN, NON_ASCII, "tests/a.py::test_b[São]"]) == [
        STAMPED,
        NON_ASCII,
        "tests/a.py::test_b[São]",
    ]
    assert escaped_ids([PLAIN, "tests/a.py::test_b[x-1]"]) == []


def test_the_report_files_are_one_unit_and_other_files_their_own():
    """The report files (most read the demo-like root): one worker runs them one after another
    instead of one waiting while the other builds the root."""
    report = {work_unit(f"tests/report/{f}::test_x") for f in ("test_report.py", "test_browser.py")}
    assert report == {"tests/report"}
    assert work_unit("tests/unit/test_report.py::test_y[a::b]") == "tests/unit/test_report.py"
    assert work_unit("tests/pipelines/test_index.py::Test::test_z") == "tests/pipelines/test_index.py"


def test_the_suite_runs_without_pytest_xdist():
    """The scheduler hook is pytest-xdist's: without the plugin (``-p no:xdist``, or xdist not
    installed) pytest refused the conftest's unknown hook before running anything."""
    repo = Path(__file__).resolve().parents[2]
    test = "tests/unit/test_collection_ids.py::test_ids_with_escaped_bytes_or_text_are_refused_and_plain_ones_pass"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", test]
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
