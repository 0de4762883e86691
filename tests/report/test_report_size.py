"""Pages stay small on a big benchmark: a benchmark with 50 times more items and rejected rows
gives a page of about the same size, showing the same number of items."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa

from pipelines.llm.ledger import REJECTED_SCHEMA
from pipelines.report.run import Config, run
from udfs import storage
from udfs.eval_items import items_table
from udfs.layout import Layout

CUT = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def write_benchmark(root: str, n_items: int) -> None:
    items = [
        {
            "item_id": f"q{i:06d}",
            "benchmark": "big",
            "task": "tf" if i % 3 else "mc",
            "split": "test" if i % 2 else "dev",
            "type": "yesno" if i % 3 else "mc",
            "question": f"Will event number {i} happen before the end of March?",
            "choices": ["Yes", "No"] if i % 3 else ["one", "two", "three", "four"],
            "gold_index": i % 2,
            "t_cut": CUT,
            "t_resolve": CUT + dt.timedelta(days=30),
        }
        for i in range(n_items)
    ]
    storage.write_dataset(items_table(items), Layout(root).benchmark("big", "eval_items"), ["split"])
    rejected = pa.table(
        {
            "stage": ["filter"] * (2 * n_items),
            "reason": [f"reason_{i % 5}" for i in range(2 * n_items)],
            "unit": ["question"] * (2 * n_items),
            "item_id": [f"r{i}" for i in range(2 * n_items)],
            "not_run": [False] * (2 * n_items),
        }
    )
    rejected = pa.table(
        [
            rejected[f.name] if f.name in rejected.column_names else pa.nulls(2 * n_items, f.type)
            for f in REJECTED_SCHEMA
        ],
        schema=REJECTED_SCHEMA,
    )
    storage.write_dataset(rejected, Layout(root).benchmark("big", "rejected"))
    card = {
        "benchmark": "big",
        "built_at": "2026-01-01T00:00:00+00:00",
        "counts": {"questions": n_items},
        "config": {},
        "model": {"backend": "scripted", "model": "none"},
        "prompt_versions": {},
        "llm_cost": {"stages": {}, "total": {}},
    }
    storage.write_json(Layout(root).benchmark("big", "dataset_card.json"), card)


def test_page_size_does_not_grow_with_the_benchmark(tmp_path: Path):
    sizes = {}
    for n in (200, 10_000):
        root = str(tmp_path / f"root{n}")
        write_benchmark(root, n)
        run(Config(root=root, sample=12))
        html = (Path(root) / "report" / "big.html").read_text()
        assert len(re.findall(r'<article class="item"', html)) == 12
        assert f"reason_0 {2 * n // 5:,}" in html  # the funnel counts every rejected row
        sizes[n] = len(html)
    assert abs(sizes[10_000] - sizes[200]) < 0.05 * sizes[200], sizes
