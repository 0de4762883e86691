"""The index job on the smallest Ray cluster it supports: two CPUs, one embedding actor (the
bundled model's; a hashing encoder embeds in tasks).

Run in a process of its own, which starts its own two-CPU cluster (the suite's shares four). The
job used to wait forever there: the embedding actor and the writer actor held a CPU each and no
read task could be scheduled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipelines.test_index import PROBES

pytestmark = pytest.mark.ray  # its own Ray, in a child process: no fixture says so

SCRIPT = """
import json, sys
import ray
from pipelines.index.build import run
from pipelines.index.config import Config
from tests.fixtures.evaluate.data import write_articles
from tests.pipelines.test_index import PROBES

root = sys.argv[1]
write_articles(root, PROBES)
ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
summary = run(Config(root=root, passage_words=()))  # the bundled model: an embedding actor
print(json.dumps({"written": summary.rows_written, "read": summary.rows_read}))
"""


def test_the_index_job_completes_on_a_two_cpu_cluster(tmp_path: Path) -> None:
    job = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "root")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        start_new_session=True,  # its Ray cluster's processes go with it on a timeout
    )
    try:
        out, err = job.communicate(timeout=300)  # a guard against the old endless wait, not a speed check
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        raise
    assert job.returncode == 0, err[-3000:]
    counts = json.loads(out.strip().splitlines()[-1])
    dated = sum(1 for _, published, _, _ in PROBES if published)
    assert counts == {"written": dated, "read": dated}
