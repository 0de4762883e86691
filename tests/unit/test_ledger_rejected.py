"""The ledger's rejected rows: order and counts kept, and a step that rejects nearly every article
of a corpus does not hold one Python dict per row."""

from __future__ import annotations

import tracemalloc

import pyarrow as pa

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import FLUSH_ROWS, Ledger
from pipelines.llm.stage import StageRunner


def _ledger(tmp_path) -> Ledger:
    return Ledger(StageRunner(str(tmp_path), "bench", LLMConfig(backend="scripted", script={})))


def test_rejected_rows_keep_their_order_and_counts_across_flushes(tmp_path):
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    n = 2 * FLUSH_ROWS + 7
    for i in range(n):
        reason = "cluster_noise" if i % 3 else "tce_span_too_long"
        ledger.drop(step, reason, unit="article", item_id=f"a{i:06d}")
    other = ledger.step("filter")
    ledger.drop(other, "over_limit", unit="question", item_id="q1", parent_id="t1")
    table = ledger.rejected_table()
    assert table.column("item_id").to_pylist() == [f"a{i:06d}" for i in range(n)] + ["q1"]
    assert ledger.rejected_counts() == {
        "filter": {"over_limit": 1},
        "formation": {"cluster_noise": n - (n + 2) // 3, "tce_span_too_long": (n + 2) // 3},
    }
    assert step.rows_read == n and sum(step.rejected.values()) == n


def test_many_rejected_rows_are_held_compactly(tmp_path):
    """20,000 rejected articles: as dicts they took about 20 MB of Python heap; held as Arrow
    tables the Python heap holds at most one flush's worth."""
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    tracemalloc.start()
    try:
        for i in range(20_000):
            ledger.drop(step, "cluster_noise", unit="article", item_id=f"article-{i:012d}", parent_id=None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ledger.rejected_table().num_rows == 20_000
    assert peak < 5 * 2**20, f"{peak / 2**20:.1f} MB of Python heap for 20,000 rejected rows"


def test_ids_dropped_in_bulk_keep_their_place_and_create_no_python_rows(tmp_path):
    """``drop_ids`` records 200,000 ids from Arrow between single drops: order, counts and the
    other columns are as single drops would leave them, and the Python heap stays small."""
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    ledger.drop(step, "too_short", unit="article", item_id="first")
    ids = pa.array([f"article-{i:012d}" for i in range(200_000)])
    tracemalloc.start()
    try:
        ledger.drop_ids(step, "cluster_noise", unit="article", ids=ids)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    ledger.drop(step, "tce_single_date", unit="article", item_id="last")
    ledger.drop_ids(step, "cluster_noise", unit="article", ids=pa.array([], pa.string()))
    table = ledger.rejected_table()
    assert table.column("item_id").to_pylist() == ["first", *ids.to_pylist(), "last"]
    bulk = table.slice(1, 1).to_pylist()[0]
    single = table.slice(0, 1).to_pylist()[0]
    assert bulk == {**single, "reason": "cluster_noise", "item_id": ids[0].as_py()}
    assert ledger.rejected_counts() == {
        "formation": {"cluster_noise": 200_000, "too_short": 1, "tce_single_date": 1}
    }
    assert step.rows_read == 200_002 and sum(step.rejected.values()) == 200_002
    assert peak < 2**20, f"{peak / 2**20:.1f} MB of Python heap for 200,000 ids dropped in bulk"
