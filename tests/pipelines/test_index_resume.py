"""The index job killed in the middle of a table, then run again: the rerun embeds only the
documents that are not in the tables yet, and leaves each one there once. The killed run is a
``python -m pipelines.index``-like process of its own with its stderr in a file, which holds its
progress lines: one a tenth of the work, with rate and time left."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

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
        START + dt.timedelta(days=n // 2, hours=n % 2),
        f"Story {n}",
        f"The harbour board met on day {n}.\nFerries {n} ran late again and the council asked why.\n"
        f"Crews said storms on day {n} closed the quay for hours.",
    )
    for n in range(120)
]
PASSAGES = sum(len(pack_passages(text, WORDS)) for *_, text in ROWS)
CONFIG = {"encoder": "hashing-64", "passage_words": (WORDS,), "batch_size": 8}
# The killed run: its writer of the passage table stops (as a killed process would) once it has
# appended more than half of the passages, so the kill falls inside that table's rows.
SCRIPT = f"""
import sys, time
import ray
from pipelines.index import embed
from pipelines.index.build import run
from pipelines.index.config import Config
from udfs.report import log_to_stderr

class StoppingWriter(embed.Writer):
    appended = 0

    def __call__(self, batch):
        out = super().__call__(batch)
        if self.name == "passages_{WORDS}":
            StoppingWriter.appended += batch.num_rows
            while StoppingWriter.appended > {PASSAGES // 2}:
                time.sleep(1)
        return out

embed.Writer = StoppingWriter
log_to_stderr()
ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
run(Config(root=sys.argv[1], **{CONFIG!r}))
"""
PROGRESS = re.compile(
    r".* augury\.index: stage=embed table=(\w+): (\d+)/(\d+) articles \((\d+)%\), [\d.e+]+/s, ETA .+"
)


def passages_in(root: str) -> int:
    """Rows of the passage table (0 while it does not exist)."""
    try:
        return connect(root).open_table(f"passages_{WORDS}").count_rows()
    except (OSError, ValueError, FileNotFoundError):
        return 0


def test_a_killed_run_resumes_without_embedding_anything_twice(tmp_path, ray_local):
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
    assert at_kill["articles"] == len(ROWS), err.read_text()[-3000:]
    assert PASSAGES // 2 < at_kill[f"passages_{WORDS}"] < PASSAGES  # killed inside the passage table
    begun = json.loads((index / RUN).read_text())["started"][f"passages_{WORDS}"]
    assert len(begun) == len({when.date() for _, when, _, _ in ROWS})  # its days are begun, none done
    assert f"passages_{WORDS}" not in json.loads((index / MANIFEST).read_text())

    lines = [PROGRESS.fullmatch(line) for line in err.read_text().splitlines()]
    articles = [m for m in lines if m and m[1] == "articles"]
    assert [int(m[4]) for m in articles][-1] == 100 and len(articles) <= 10
    assert all(int(m[3]) == len(ROWS) for m in articles)
    assert [int(m[2]) for m in articles] == sorted(int(m[2]) for m in articles)

    summary = run(Config(root=root, **CONFIG))
    tables = {name: connect(root).open_table(name).to_arrow() for name in ("articles", f"passages_{WORDS}")}
    assert "articles documents embedded" not in summary.metrics  # its days were all recorded
    assert summary.metrics[f"passages_{WORDS} documents embedded"] == PASSAGES - at_kill[f"passages_{WORDS}"]
    passage_ids = Counter(tables[f"passages_{WORDS}"]["passage_id"].to_pylist())
    assert len(passage_ids) == PASSAGES and set(passage_ids.values()) == {1}
    assert sorted(tables["articles"]["article_id"].to_pylist()) == [r[0] for r in ROWS]
    assert summary.reconciles
    assert not (index / RUN).exists()  # nothing left begun
    again = run(Config(root=root, **CONFIG))
    assert again.metrics["partitions changed"] == 0 and again.rows_written == 0
