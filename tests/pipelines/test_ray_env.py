"""Starting Ray for a job: Ray Data's progress display follows the terminal."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray.data

from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import FOOTER_ACTORS, ensure_ray

pytestmark = pytest.mark.ray


@pytest.mark.parametrize(
    ("stdout", "stderr", "before", "after"),
    [
        (False, False, True, False),  # a job's log file
        (False, True, True, False),  # `| tee run.log`: Ray would log its report, bars or not
        (True, False, True, False),  # `2> run.log`: the bars would land in the file
        (True, True, True, True),  # a terminal: bars wanted
        (True, True, False, False),  # ... unless the user turned them off
    ],
)
def test_progress_bars_only_on_a_terminal(ray_local, monkeypatch, stdout, stderr, before, after):
    """Off a terminal Ray Data logs a several-line progress report every ten seconds per dataset
    (over a thousand lines in one demo log)."""
    context = ray.data.DataContext.get_current()
    monkeypatch.setattr(context, "enable_progress_bars", before)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: stdout)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: stderr)
    ensure_ray(LLMConfig())  # Ray is already up here: the setting must not depend on starting it
    assert context.enable_progress_bars is after


LOCAL_START = """
import os, sys, tempfile
import lancedb
from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import FOOTER_ACTORS, ensure_ray
lancedb.connect(tempfile.mkdtemp()).create_table("t", [{"x": 1}]).count_rows()  # as the index job
ensure_ray(LLMConfig(ray_num_cpus=3))
print(os.environ[FOOTER_ACTORS])
"""


@pytest.mark.parametrize(("user", "expected"), [(None, "3"), ("8", "8")])
def test_a_local_start_reads_footers_with_one_actor_per_cpu_and_logs_no_fork_warnings(user, expected):
    """Ray Data starts 32 footer-reading worker processes for every Parquet read unless told
    otherwise: a small index run took twice as long with them and the workers held 8 GB. And a
    driver that opened LanceDB before starting Ray logs no fork warnings from Ray's processes.
    A fresh process, so that this start is the one that starts Ray."""
    env = {k: v for k, v in os.environ.items() if k not in (FOOTER_ACTORS, "RAY_ADDRESS")}
    if user:
        env[FOOTER_ACTORS] = user
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_START],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == expected
    assert "fork support" not in done.stderr
