"""The ledger's rejected rows: order and counts kept, and a step that rejects nearly every article
of a corpus holds neither one Python dict per row nor, past ``SPILL_ROWS``, the rows at all."""

from __future__ import annotations

import tempfile
import tracemalloc

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import pipelines.llm.ledger as ledger_module
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import FLUSH_ROWS, REJECTED_SCHEMA, Ledger, read_rejected
from pipelines.llm.stage import StageRunner
from udfs import storage


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


def test_rows_past_the_spill_size_go_to_disk_and_come_back_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger_module, "SPILL_ROWS", 2_500)
    (tmp_path / "spill").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "spill"))
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    expected = []
    for window in range(4):
        ids = [f"w{window}-{i:05d}" for i in range(1_700)]
        ledger.drop_ids(step, "cluster_noise", unit="article", ids=pa.array(ids))
        ledger.drop(step, "tce_single_date", unit="article", item_id=f"w{window}-single")
        expected += [*ids, f"w{window}-single"]
    assert len(list((tmp_path / "spill").glob("*/*.parquet"))) == 2  # 4 × 1,701 rows: two spills
    assert ledger.rejected_table().column("item_id").to_pylist() == expected
    assert ledger.write_rejected() == len(expected)
    written = read_rejected(str(tmp_path), "bench")
    assert written.schema == REJECTED_SCHEMA
    assert written.column("item_id").to_pylist() == expected
    assert ledger.rejected_counts() == {"formation": {"cluster_noise": 6_800, "tce_single_date": 4}}
    assert ledger.write_rejected() == len(expected)  # a second write replaces the first
    assert read_rejected(str(tmp_path), "bench").num_rows == len(expected)


def test_a_corpus_of_rejected_articles_is_not_held_in_memory(tmp_path):
    """400,000 articles dropped window by window: held as Arrow they took ~36 MB of the driver;
    spilled, the driver holds at most ``SPILL_ROWS`` of them (Arrow's own count of the bytes it
    has allocated, which RSS would blur with the heap's high-water mark)."""
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    first = pa.array([f"article-000-{i:012d}" for i in range(20_000)])
    before = pa.total_allocated_bytes()
    for window in range(20):
        ids = pc.utf8_replace_slice(first, 8, 11, f"{window:03d}")
        ledger.drop_ids(step, "cluster_noise", unit="article", ids=ids)
    held = (pa.total_allocated_bytes() - before) / 2**20
    assert held < 8, f"400,000 rejected rows hold {held:.0f} MB of Arrow memory"
    assert ledger.write_rejected() == 400_000
    assert storage.count_rows(ledger.uri()) == 400_000
    (written,) = storage.list_files(ledger.uri())
    fs, path = storage.filesystem(written)
    with pq.ParquetFile(path, filesystem=fs) as parquet:  # row groups of ROW_GROUP_ROWS, not one a batch
        assert parquet.num_row_groups == -(-400_000 // ledger_module.ROW_GROUP_ROWS)


def test_writing_the_rejected_rows_holds_one_small_row_group(tmp_path, monkeypatch):
    """The writer holds a row group before it encodes it: at 64k rows a group cost the driver
    ~22 MB of peak RSS, so a bench corpus's rejects looked like growth with the corpus. Arrow's
    allocations are sampled at every group the writer takes."""
    ledger = _ledger(tmp_path)
    step = ledger.step("formation")
    for window in range(8):
        ids = pa.array([f"article-{window:03d}-{i:012d}" for i in range(10_000)])
        ledger.drop_ids(step, "cluster_noise", unit="article", ids=ids)
    held, write_table = [], pq.ParquetWriter.write_table
    before = pa.total_allocated_bytes()

    def sampled(writer, table, *args, **kwargs):
        held.append(pa.total_allocated_bytes() - before)
        return write_table(writer, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", sampled)
    assert ledger.write_rejected() == 80_000
    assert len(held) == 8 and max(held) / 2**20 < 2, f"{max(held) / 2**20:.1f} MB held by a row group"
