"""Strict statistics: the per-day tables beside the articles table, written by the index job and
summed over a window by strict and tfidf searches.

``term_days`` holds one row per day and term (the day's document frequency) and ``day_sizes`` one
row per day (documents, tokens), whatever the batches of the embedding stage were: each changed
day is counted whole by the read task that makes its documents (``day_rows``: a read task holds
whole days), and travels to the index job's appends as a single row, whose ``statistics_rows``
are appended in bulk with the documents.

A window ``[since, cutoff)`` sums the rows of its whole days; a first or last day cut by a time of
day is counted from the indexed text of its articles in the window (``WindowStatistics``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.index.tables import connect
from udfs.index_docs import DAY_SIZES, TERM_DAYS, quoted_list, term_statistics, terms, timestamp_literal
from udfs.timeutil import to_utc

STATISTICS_TABLES = ("term_days", "day_sizes")
# the statistics of a day as one row of the index job's stream (``day_rows``): its documents and
# tokens, and its terms with their document frequencies as two lists of one order
DAY_ROWS = pa.schema(
    [
        pa.field("published_date", pa.date32(), nullable=False),
        pa.field("docs", pa.int64()),
        pa.field("tokens", pa.int64()),
        pa.field("terms", pa.list_(pa.string())),
        pa.field("dfs", pa.list_(pa.int64())),
    ]
)


def day_rows(docs: pa.Table) -> pa.Table:
    """The strict statistics of the article documents of whole days, one ``DAY_ROWS`` row a day."""
    term_days, day_sizes = term_statistics(docs)
    lists = term_days.group_by("published_date", use_threads=False).aggregate(
        [("term", "list"), ("df", "list")]
    )
    at = pc.index_in(day_sizes["published_date"], value_set=lists["published_date"])  # null: a day of no term
    return pa.table(
        {
            **{name: day_sizes[name] for name in ("published_date", "docs", "tokens")},
            "terms": lists["term_list"].take(at),
            "dfs": lists["df_list"].take(at),
        },
        schema=DAY_ROWS,
    )


def statistics_rows(rows: pa.Table) -> dict[str, pa.Table]:
    """The ``term_days`` and ``day_sizes`` rows of some ``day_rows`` rows."""
    terms, dfs = rows["terms"].combine_chunks(), rows["dfs"].combine_chunks()
    term_days = pa.table(
        {
            "published_date": rows["published_date"].take(pc.list_parent_indices(terms)),
            "term": pc.list_flatten(terms),
            "df": pc.list_flatten(dfs),
        }
    )
    return {"term_days": term_days.cast(TERM_DAYS), "day_sizes": rows.select(DAY_SIZES.names).cast(DAY_SIZES)}


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
