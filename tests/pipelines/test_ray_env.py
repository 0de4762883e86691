"""Starting Ray for a job: Ray Data's progress display follows the terminal."""

import sys

import pytest
import ray.data

from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray

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
