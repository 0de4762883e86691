"""The repository's top level holds the project's own files: the directories the design requires
and a few named files. Test output once landed there and was committed (thirteen prompt dumps of
a test's recording renderer, written to the working directory by an earlier version)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOP_FILES = {
    ".gitignore",
    "Dockerfile",
    "Makefile",
    "README.md",
    "constraints.txt",
    "demo.sh",
    "pyproject.toml",
}
REQUIRED_DIRS = {"jobs", "pipelines", "udfs", "cluster", "prompts", "tests"}


def test_the_top_level_holds_only_the_projects_files():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert {p for p in tracked if "/" not in p} == TOP_FILES
    assert {p.split("/")[0] for p in tracked if "/" in p} >= REQUIRED_DIRS
