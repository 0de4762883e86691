"""Starting Ray for a job: Ray Data's progress display follows the terminal."""

import sys

import pytest
import ray.data

from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("tty", [False, True])
def test_progress_bars_only_on_a_terminal(ray_local, monkeypatch, tty):
    """Off a terminal Ray Data would log a several-line progress report every ten seconds per
    dataset (over a thousand lines in one demo log); on one, its bars are wanted."""
    context = ray.data.DataContext.get_current()
    monkeypatch.setattr(context, "enable_progress_bars", not tty)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    ensure_ray(LLMConfig())  # Ray is already up here: the setting must not depend on starting it
    assert context.enable_progress_bars is tty
