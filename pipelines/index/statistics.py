"""Strict statistics: the per-day tables beside the articles table, written by the index job and
summed over a window by strict and tfidf searches.

``term_days`` holds one row per day and term (the day's document frequency) and ``day_sizes`` one
row per day (documents, tokens), whatever the batches of the embedding stage were: each changed
day is counted whole from its partition files. Several days go to one Ray Data task (a bundle of
about ``DAYS_BYTES`` of Parquet) and one writer actor appends the rows in bulk, so a corpus of a
thousand small days costs a few tasks and appends, not a thousand of each.

A window ``[since, cutoff)`` sums the rows of its whole days; a first or last day cut by a time of
day is counted from the indexed text of its articles in the window (``WindowStatistics``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.index.manifest import Partition, bundles
from pipelines.index.tables import STORAGE_VERSION, connect
from udfs import storage
from udfs.index_docs import (
    ARTICLE_COLUMNS,
    DAY_SIZES,
    TERM_DAYS,
    documents,
    quoted_list,
    term_statistics,
    terms,
    timestamp_literal,
)
from udfs.timeutil import to_utc

STATISTICS_TABLES = ("term_days", "day_sizes")
DAYS_BYTES = 64 * 2**20  # Parquet bytes of the days one counting task reads
WRITE_ROWS = 200_000  # statistics rows a writer appends at once
# days' statistics as one flat row set for the trip to the writer: the term rows, then the days'
# size rows (term null)
DAY_ROWS = pa.schema(
    [
        pa.field("published_date", pa.date32(), nullable=False),
        pa.field("term", pa.string()),
        pa.field("df", pa.int64()),
        pa.field("docs", pa.int64()),
        pa.field("tokens", pa.int64()),
    ]
)


def day_rows(batch: pa.Table, lead_words: int, filesystem: pafs.FileSystem) -> pa.Table:
    """Ray Data task (one bundle of whole days a batch): read the days' partition files and count
    their documents."""
    tables = [
        pq.read_table(path, filesystem=filesystem, columns=ARTICLE_COLUMNS)
        for paths in batch["paths"].to_pylist()
        for path in paths
    ]
    articles = pa.concat_tables(tables, promote_options="permissive")
    term_days, day_sizes = term_statistics(documents(articles, lead_words))
    # each part's missing columns come back null
    return (
        pa.concat_tables([term_days, day_sizes], promote_options="default")
        .select(DAY_ROWS.names)
        .cast(DAY_ROWS)
    )


class StatisticsWriter:
    """Ray Data actor (one a run): appends the rows of whole days to ``term_days`` and
    ``day_sizes``, creating them on the first batch; passes on row counts only."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.tables: dict = {}  # name → open table, so a run lists the tables once

    def __call__(self, batch: pa.Table) -> pa.Table:
        sizes = pc.is_null(batch["term"])
        parts = {
            "term_days": batch.filter(pc.invert(sizes)).select(TERM_DAYS.names).cast(TERM_DAYS),
            "day_sizes": batch.filter(sizes).select(DAY_SIZES.names).cast(DAY_SIZES),
        }
        for name, rows in parts.items():
            if name in self.tables:
                self.tables[name].add(rows)
            else:
                self.tables[name] = self._open(name, rows)
        return pa.table(
            {"term_days": [parts["term_days"].num_rows], "day_sizes": [parts["day_sizes"].num_rows]}
        )

    def _open(self, name: str, rows: pa.Table):
        """Table ``name`` with ``rows`` added: opened, or created with them."""
        db = connect(self.root)
        if name not in db.list_tables().tables:
            return db.create_table(name, data=rows, data_storage_version=STORAGE_VERSION)
        table = db.open_table(name)
        table.add(rows)
        return table


def append_statistics(
    root: str, days: dict[str, Partition], lead_words: int, runtime_env: dict
) -> dict[str, int]:
    """Count the days of ``days`` into the statistics tables; the rows written per table. Their
    rows of these days must have been deleted before."""
    import ray

    # the driver's filesystem object goes to the tasks: on S3 it carries the endpoint and every
    # credential (a session token too), as the embedding stage's read tasks get it
    filesystem, _ = storage.filesystem(next(iter(days.values())).files[0])
    items = [{"paths": [storage.filesystem(f)[1] for f in files]} for files in bundles(days, DAYS_BYTES)]
    counted = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        day_rows,
        fn_kwargs={"lead_words": lead_words, "filesystem": filesystem},
        batch_size=1,
        batch_format="pyarrow",
        runtime_env=runtime_env,
    )
    counts = counted.map_batches(
        StatisticsWriter,
        fn_constructor_args=(root,),
        batch_size=WRITE_ROWS,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0,  # waits on storage; a CPU held here starved the counting tasks of a 2-CPU cluster
        runtime_env=runtime_env,
    )
    written = {"term_days": 0, "day_sizes": 0}
    for batch in counts.iter_batches(batch_size=None, batch_format="pyarrow"):
        for name in written:
            written[name] += sum(batch[name].to_pylist())
    return written


def delete_days(db, days: list[str]) -> None:
    """Remove the statistics rows of ``days`` (tables that do not exist yet have none)."""
    existing = set(db.list_tables().tables)
    for name in STATISTICS_TABLES:
        if name in existing:
            delete_rows(db.open_table(name), days)


def days_filter(days: list[str]) -> str:
    """The rows of ``days`` (any index table: each has ``published_date``)."""
    return "published_date IN (" + ", ".join(f"date '{d}'" for d in days) + ")"


def delete_rows(table, days: list[str]) -> None:
    """Remove the rows of ``days`` from ``table``, 500 days a statement."""
    for start in range(0, len(days), 500):
        table.delete(days_filter(days[start : start + 500]))


def count_days(table, days: list[str]) -> int:
    """The rows of ``days`` in ``table``."""
    return sum(table.count_rows(days_filter(days[i : i + 500])) for i in range(0, len(days), 500))


def index_statistics(root: str) -> None:
    """B-trees on the statistics tables' day (and term) columns; later runs fold new rows in."""
    from lancedb.index import BTree

    db = connect(root)
    for name in STATISTICS_TABLES:
        if name not in db.list_tables().tables:
            continue
        stats = db.open_table(name)
        stats.optimize()
        if not stats.list_indices():
            for column in ("published_date", "term") if "term" in stats.schema.names else ("published_date",):
                stats.create_index(column, config=BTree(), replace=True)


class WindowStatistics:
    """Window statistics from the per-day tables of an index (cached per window and terms)."""

    def __init__(self, db) -> None:
        self.db = db
        self._cache: dict[tuple, tuple[int, int, Counter]] = {}

    def window(
        self,
        articles,
        cutoff: dt.date | dt.datetime,
        since: dt.date | dt.datetime | None,
        wanted: list[str],
    ) -> tuple[int, int, Counter]:
        """(documents, tokens, document frequency per term of ``wanted``) of the articles in
        ``[since, cutoff)``; ``articles`` is the articles table, which a partial day is counted from."""
        hi = to_utc(cutoff)
        lo = to_utc(since) if since is not None else None
        key = (hi, lo, tuple(wanted))
        if key not in self._cache:
            first = None if lo is None else lo.date() + dt.timedelta(days=_after_midnight(lo))
            last = hi.date()  # whole days are those before the cutoff's own day
            if first is not None and first > last:  # inside one day
                partial, (n, tokens, df) = [(lo, hi)], (0, 0, Counter())
            else:
                partial = [(lo, _midnight(first))] if first is not None and _after_midnight(lo) else []
                partial += [(_midnight(last), hi)] if _after_midnight(hi) else []
                n, tokens, df = self._whole_days(first, last, wanted)
            for a, b in partial:
                n_p, tokens_p, df_p = _count(articles, a, b, wanted)
                n, tokens, df = n + n_p, tokens + tokens_p, df + df_p
            self._cache[key] = (n, tokens, df)
        return self._cache[key]

    def _whole_days(
        self, first: dt.date | None, last: dt.date, wanted: list[str]
    ) -> tuple[int, int, Counter]:
        days = f"published_date < date '{last.isoformat()}'"
        if first is not None:
            days += f" AND published_date >= date '{first.isoformat()}'"
        sizes = _rows(self.db.open_table("day_sizes"), days, ["docs", "tokens"])
        df: Counter = Counter()
        if wanted:
            found = _rows(
                self.db.open_table("term_days"), f"term IN ({quoted_list(wanted)}) AND {days}", ["term", "df"]
            )
            for term, count in zip(found["term"].to_pylist(), found["df"].to_pylist(), strict=True):
                df[term] += count
        return sum(sizes["docs"].to_pylist()), sum(sizes["tokens"].to_pylist()), df


def _rows(table, where: str, columns: list[str]) -> pa.Table:
    """Every row of ``table`` matching ``where`` (the count first: a query's limit is explicit)."""
    n = table.count_rows(where)
    return table.search().where(where).select(columns).limit(max(n, 1)).to_arrow()


def _count(articles, a: dt.datetime, b: dt.datetime, wanted: list[str]) -> tuple[int, int, Counter]:
    """Statistics of the articles in ``[a, b)`` counted from their indexed text (a partial day)."""
    where = f"published_at >= {timestamp_literal(a)} AND published_at < {timestamp_literal(b)}"
    texts = _rows(articles, where, ["text"])["text"].to_pylist() if articles.count_rows(where) else []
    df: Counter = Counter()
    tokens = 0
    for text in texts:
        found = terms(text)
        tokens += len(found)
        df.update(set(found) & set(wanted))
    return len(texts), tokens, df


def _after_midnight(when: dt.datetime) -> int:
    return int(when != _midnight(when.date()))


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(0), tzinfo=dt.UTC)
