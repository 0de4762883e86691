"""The index job killed in the middle of its stream, then run again: the rerun embeds only the
documents that are not in the tables yet, leaves each one there once, and ends with the tables
(strict statistics too) of a run never killed. The killed run is a ``python -m pipelines.index``-like
process of its own with its stderr in a file, which holds its progress lines: one a tenth of the
work, with rate and time left."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipelines.index import embed
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.manifest import MANIFEST, RUN
from pipelines.index.tables import connect
from tests.fixtures.evaluate.data import write_articles
from udfs.index_docs import pack_passages

START = dt.datetime(2023, 1, 1, 9, tzinfo=dt.UTC)
WORDS = 8  # passage size: each article makes several
ROWS = [
    (
        f"a{n:03d}",
        START + dt.timedelta(days=n // 4, hours=n % 4),
        f"Story {n}",
        f"The harbour board met on day {n}.\nFerries {n} ran late again and the council asked why.\n"
        f"Crews said storms on day {n} closed the quay for hours.",
    )
    for n in range(120)
]
PASSAGES = sum(len(pack_passages(text, WORDS)) for *_, text in ROWS)
CONFIG = {"encoder": "hashing-64", "passage_words": (WORDS,), "passage_vectors": (WORDS,), "batch_size": 8}
# The killed run: its appends stop (as a killed process would) once the table holds more than
# half of the passages, so the kill falls inside every table's rows (an article's documents go
# together).
SCRIPT = f"""
import sys, time
import ray
from pipelines.index import embed
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.tables import connect
from udfs.report import log_to_stderr

once = embed.append

def passages(root):  # in the workers: no passage table before the first passage is appended
    db = connect(root)
    return db.open_table("passages_{WORDS}").count_rows() if "passages_{WORDS}" in db.list_tables().tables else 0

def stopping(rows, **kwargs):
    out = once(rows, **kwargs)
    while passages(kwargs["root"]) > {PASSAGES // 2}:
        time.sleep(1)
    return out

embed.append = stopping
embed.READ_BYTES = 1  # a read task a day
log_to_stderr()
ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
run(Config(root=sys.argv[1], **{CONFIG!r}))
"""
PROGRESS = re.compile(
    r".* augury\.index: stage=embed tables=([\w,]+): (\d+)/(\d+) articles \((\d+)%\), [\d.e+]+/s, ETA .+"
)
TABLES = ("articles", f"passages_{WORDS}", "term_days", "day_sizes")


def passages_in(root: str) -> int:
    """Rows of the passage table (0 while it does not exist)."""
    try:
        return connect(root).open_table(f"passages_{WORDS}").count_rows()
    except (OSError, ValueError, FileNotFoundError):
        return 0


def test_a_killed_run_resumes_without_embedding_anything_twice(tmp_path, ray_local, monkeypatch):
    # a read task a day, so the rerun has days whose documents are all in (a bundle with nothing
    # to add once failed) as well as days cut by the kill
    monkeypatch.setattr(embed, "READ_BYTES", 1)
    root = str(tmp_path / "root")
    write_articles(root, ROWS)
    err = tmp_path / "stderr.log"
    index = Path(root, "index", "articles")
    with err.open("w") as stream:
        job = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, root],
            stdout=subprocess.DEVNULL,
            stderr=stream,
            cwd=Path(__file__).resolve().parents[2],
            start_new_session=True,  # its Ray cluster's processes go with it
        )
        try:
            while job.poll() is None and passages_in(root) <= PASSAGES // 2:
                time.sleep(0.2)
        finally:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    db = connect(root)
    at_kill = {name: db.open_table(name).count_rows() for name in ("articles", f"passages_{WORDS}")}
    assert PASSAGES // 2 < at_kill[f"passages_{WORDS}"] < PASSAGES, err.read_text()[-3000:]
    assert 0 < at_kill["articles"] < len(ROWS)  # killed inside every table
    days = len({when.date() for _, when, _, _ in ROWS})
    begun = json.loads((index / RUN).read_text())["started"]
    assert [len(begun[t]) for t in ("articles", f"passages_{WORDS}", "statistics")] == [days] * 3  # none done
    assert not (index / MANIFEST).exists()

    lines = [PROGRESS.fullmatch(line) for line in err.read_text().splitlines()]
    progress = [m for m in lines if m]
    assert progress and all(m[1] == f"articles,passages_{WORDS},statistics" for m in progress)
    assert all(int(m[3]) == len(ROWS) for m in progress) and len(progress) <= 10
    assert [int(m[2]) for m in progress] == sorted(int(m[2]) for m in progress)
    assert 0 < int(progress[-1][4]) < 100

    summary = run(Config(root=root, **CONFIG))
    for name in ("articles", f"passages_{WORDS}"):  # what was missing, and nothing else, embedded
        assert (
            summary.metrics[f"{name} documents embedded"]
            == connect(root).open_table(name).count_rows() - at_kill[name]
        )
    assert summary.reconciles
    assert not (index / RUN).exists()  # nothing left begun
    fresh = str(tmp_path / "fresh")  # the same corpus indexed by a run never killed
    write_articles(fresh, ROWS)
    run(Config(root=fresh, **CONFIG))
    for name in TABLES:
        resumed, built = (_rows(r, name) for r in (root, fresh))
        assert resumed == built and len(set(resumed)) == len(resumed), name
    again = run(Config(root=root, **CONFIG))
    assert again.metrics["partitions changed"] == 0 and again.rows_written == 0


def _rows(root: str, name: str) -> list[tuple]:
    """Every row of an index table but its vectors, sorted."""
    table = connect(root).open_table(name).to_arrow()
    return sorted(
        tuple(r.values())
        for r in table.drop_columns(["vector"] * ("vector" in table.column_names)).to_pylist()
    )
