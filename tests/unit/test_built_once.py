"""``built_once`` (tests/conftest.py): a session input asked for at the same time by several
callers (the pytest-xdist workers) is built by one of them, once; a build that fails is built
again by the next caller."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest


def test_callers_at_the_same_time_share_one_build(built_once):
    name, calls = f"shared-{uuid.uuid4().hex[:8]}", []

    def build(root: Path) -> None:
        calls.append(threading.get_ident())
        time.sleep(0.3)  # the others ask while it builds
        root.mkdir()
        (root / "table.txt").write_text("rows")

    roots: list[str] = []
    threads = [threading.Thread(target=lambda: roots.append(built_once(name, build))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(set(roots)) == 1 and (Path(roots[0]) / "table.txt").read_text() == "rows"


def test_a_failed_build_is_built_again_by_the_next_caller(built_once):
    name, attempts = f"flaky-{uuid.uuid4().hex[:8]}", []

    def build(root: Path) -> None:
        attempts.append(1)
        root.mkdir()
        if len(attempts) == 1:
            (root / "half").write_text("torn")
            raise OSError("disk full")
        (root / "whole").write_text("ok")

    with pytest.raises(OSError, match="disk full"):
        built_once(name, build)
    root = Path(built_once(name, build))
    assert len(attempts) == 2
    assert sorted(p.name for p in root.iterdir()) == ["whole"]  # the torn first try is gone
    built_once(name, build)
    assert len(attempts) == 2
