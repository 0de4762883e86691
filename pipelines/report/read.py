"""What the report reads from a root: cards, counts, a sample of items, the articles they name
and the evaluation's outputs. Every read is projected and filtered in the reader (an item sample
reads its ids first, then only the sampled rows; articles are looked up by id), so a page costs
the same on a demo root and on a corpus of millions of articles."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from udfs import storage
from udfs.eval_items import EVAL_ITEM_SCHEMA
from udfs.layout import Layout
from udfs.report_view import sample_ids
from udfs.schemas import ARTICLES

ARTICLE_COLUMNS = ["article_id", "title", "url", "host", "published_at"]


def discover_benchmarks(root: str) -> list[str]:
    """The benchmarks of a root: every ``benchmarks/<name>/`` holding a ``dataset_card.json``.
    The one place that lists them (the builder registry can answer here instead)."""
    base = Layout(root).path("benchmarks")
    fs, path = storage.filesystem(base)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    names = [PurePosixPath(i.path).name for i in fs.get_file_info(pafs.FileSelector(path))]
    return sorted(n for n in names if storage.is_file(Layout(root).benchmark(n, "dataset_card.json")))


def read_card(root: str, name: str) -> dict[str, Any]:
    return storage.read_json(Layout(root).benchmark(name, "dataset_card.json"))


def table_rows(root: str, name: str) -> dict[str, int]:
    """Rows of each table of a benchmark, from the Parquet footers (no data read)."""
    base = Layout(root).benchmark(name)
    fs, path = storage.filesystem(base)
    tables = {}
    for info in fs.get_file_info(pafs.FileSelector(path)):
        table = PurePosixPath(info.path).name
        if info.type == pafs.FileType.Directory and not table.startswith(("_", ".")):
            tables[table] = storage.count_rows(storage.join(base, table))
    return dict(sorted(tables.items()))


def rejected_counts(root: str, name: str) -> dict[tuple[str, str, str], int]:
    """Rejected rows of a benchmark by (stage, unit, reason), counted batch by batch over those
    three columns (a formation step can drop nearly every corpus article)."""
    uri = Layout(root).benchmark(name, "rejected")
    counts: Counter[tuple[str, str, str]] = Counter()
    if not storage.exists(uri):
        return {}
    columns = ["stage", "unit", "reason"]
    for batch in storage.open_dataset(uri).scanner(columns=columns).to_batches():
        if not batch.num_rows:
            continue
        grouped = pa.Table.from_batches([batch]).group_by(columns).aggregate([([], "count_all")])
        for row in grouped.to_pylist():
            counts[row["stage"], row["unit"], row["reason"]] += row["count_all"]
    return dict(sorted(counts.items()))


def item_index(root: str, name: str) -> list[dict[str, str]]:
    """Id, task and split of every item (three projected columns; never the items' text)."""
    uri = Layout(root).benchmark(name, "eval_items")
    if not storage.list_files(uri, ".parquet"):
        return []
    return storage.read_table(uri, EVAL_ITEM_SCHEMA, columns=["item_id", "task", "split"]).to_pylist()


def sample_items(
    root: str, name: str, index: list[dict[str, str]], n: int, seed: int
) -> list[dict[str, Any]]:
    """``n`` items spread over the tasks (``udfs.report_view.sample_ids``), read by id."""
    ids = sample_ids(((r["task"], r["item_id"]) for r in index), n, seed)
    if not ids:
        return []
    uri = Layout(root).benchmark(name, "eval_items")
    rows = storage.read_table(uri, EVAL_ITEM_SCHEMA, filter=ds.field("item_id").isin(ids)).to_pylist()
    order = {id_: i for i, id_ in enumerate(ids)}
    return sorted(rows, key=lambda r: order[r["item_id"]])


def read_rows(uri: str, column: str, values: Iterable[Any], columns: list[str] | None = None) -> list[dict]:
    """The rows of a table whose ``column`` is one of ``values`` (an absent table has none)."""
    values = sorted(set(values))
    if not values or not storage.list_files(uri, ".parquet"):
        return []
    return storage.read_table(uri, columns=columns, filter=ds.field(column).isin(values)).to_pylist()


def column_values(uri: str, column: str, filter: ds.Expression | None = None) -> list[Any]:
    """One column of a table (projected; optionally filtered), or nothing when it is absent."""
    if not storage.list_files(uri, ".parquet"):
        return []
    return storage.read_table(uri, columns=[column], filter=filter)[column].to_pylist()


def articles(root: str, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Title, URL, host and date of the corpus articles ``ids``: one streamed scan of five
    columns, filtered to the ids in the reader; ids not in the corpus are left out."""
    ids = sorted({i for i in ids if i})
    if not ids or not storage.exists(Layout(root).table(ARTICLES)):
        return {}
    scanner = ARTICLES.dataset(root).scanner(columns=ARTICLE_COLUMNS, filter=ds.field("article_id").isin(ids))
    found: dict[str, dict[str, Any]] = {}
    for batch in scanner.to_batches():
        found.update((row["article_id"], row) for row in batch.to_pylist())
    return found


def leaderboard(root: str, benchmark: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``eval/leaderboard.parquet`` (of one benchmark, or all); none before an evaluation."""
    uri = Layout(root).eval("leaderboard.parquet")
    if not storage.exists(uri):
        return []
    where = ds.field("benchmark") == benchmark if benchmark else None
    return storage.read_table(uri, filter=where).to_pylist()


def drift(root: str) -> list[dict[str, Any]]:
    """Monthly accuracy rows of ``eval/drift.parquet`` (none before an evaluation with drift)."""
    uri = Layout(root).eval("drift.parquet")
    if not storage.exists(uri):
        return []
    table = storage.read_table(
        uri, columns=["model", "benchmark", "task", "setting", "month", "accuracy", "n"]
    )
    return table.sort_by([("month", "ascending")]).to_pylist()


def audit(root: str) -> dict[str, Any] | None:
    """``eval/audit.json`` (None before an audit)."""
    uri = Layout(root).eval("audit.json")
    return storage.read_json(uri) if storage.exists(uri) else None


def drift_png(root: str) -> bytes | None:
    uri = Layout(root).eval("drift.png")
    return storage.read_bytes(uri) if storage.exists(uri) else None


def count_by(rows: list[dict[str, str]], key: str) -> dict[str, int]:
    return dict(sorted(Counter(r[key] for r in rows).items()))
