"""Strict BM25: term statistics from the window's articles only, without an index per window.

Daily Oracle's parity setting wants BM25 whose IDF and average length come from the documents a
forecaster may see, not from the whole index. The index job keeps per-day statistics of the
article documents beside the table: ``term_days`` (document frequency of each term per day) and
``day_sizes`` (documents and tokens per day), one row per day and term (``statistics``). A strict
search then

1. asks the engine for a pool: the full-text top ``pool_size(k)`` eligible articles (the window
   and every other bound stay a prefilter inside the engine query);
2. sums the statistics of the query's terms over the window's whole days (B-tree filtered reads
   of one row per term and day) and counts the articles of a partial first or last day
   directly;
3. scores every pool article with BM25 (k1 = 1.2, b = 0.75) under those statistics and keeps the
   k best (ties: article id).

No article published at or after the cutoff enters any statistic, so adding one changes no
score. Scores are exact for the pool's articles; an article outside the engine's top
``pool_size(k)`` cannot come back. Hybrid strict fuses the strict BM25 ranking with the dense
ranking by reciprocal rank (k = 60), each over the pool depth.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from udfs.index_docs import quoted_list, terms, timestamp_literal
from udfs.timeutil import to_utc

if TYPE_CHECKING:
    from pipelines.index.engine import ArticleIndex

K1, B = 1.2, 0.75
RRF_K = 60


def pool_size(k: int) -> int:
    """How many engine-ranked articles a strict search rescores."""
    return max(200, 20 * k)


def bm25(tf: int, dl: int, df: int, n: int, avgdl: float) -> float:
    """One term's BM25 contribution (the Lucene form of IDF, never negative)."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


class StrictStatistics:
    """Window statistics from the index's per-day tables (cached per window and term)."""

    def __init__(self, db) -> None:
        self.db = db
        self._cache: dict[tuple, tuple[int, int, dict[str, int]]] = {}

    def rank(
        self,
        index: ArticleIndex,
        query: str,
        cutoff: dt.date | dt.datetime,
        since: dt.date | dt.datetime | None,
        where: str,
        k: int,
        mode: str,
    ) -> list[dict[str, Any]]:
        """The k best eligible articles under window statistics, as engine rows with
        ``_strict_score``."""
        wanted = sorted(set(terms(query)))
        depth = pool_size(k)
        pool = index.query(query, "bm25").where(where, prefilter=True).limit(depth).to_list()
        n, tokens, df = self.window(index, cutoff, since, wanted)
        scored = []
        for row in pool:
            counts = Counter(terms(row["text"]))
            dl = sum(counts.values())
            score = sum(bm25(counts[t], dl, df[t], n, tokens / n) for t in wanted if counts[t] and df[t])
            if score > 0:
                scored.append({**row, "_strict_score": score})
        scored.sort(key=lambda r: (-r["_strict_score"], r["article_id"]))
        if mode == "hybrid":
            dense = index.query(query, "dense").where(where, prefilter=True).limit(depth).to_list()
            scored = _fuse(scored, dense)
        return scored[:k]

    def window(
        self,
        index: ArticleIndex,
        cutoff: dt.date | dt.datetime,
        since: dt.date | dt.datetime | None,
        wanted: list[str],
    ) -> tuple[int, int, Counter]:
        """(documents, tokens, document frequency per term) of the articles in ``[since, cutoff)``."""
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
                n_p, tokens_p, df_p = _count(index, a, b, wanted)
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


def _rows(table, where: str, columns: list[str]):
    """Every row of ``table`` matching ``where`` (the count first: a query's limit is explicit)."""
    n = table.count_rows(where)
    return table.search().where(where).select(columns).limit(max(n, 1)).to_arrow()


def _count(
    index: ArticleIndex, a: dt.datetime, b: dt.datetime, wanted: list[str]
) -> tuple[int, int, Counter]:
    """Statistics of the articles in ``[a, b)`` counted from their indexed text (a partial day)."""
    where = f"published_at >= {timestamp_literal(a)} AND published_at < {timestamp_literal(b)}"
    texts = _rows(index.table, where, ["text"])["text"].to_pylist() if index.table.count_rows(where) else []
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


def _fuse(bm25_rows: list[dict[str, Any]], dense_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reciprocal-rank fusion of two ranked lists of rows (ties: article id)."""
    fused: dict[str, dict[str, Any]] = {}
    for ranked in (bm25_rows, dense_rows):
        for rank, row in enumerate(ranked, 1):
            entry = fused.setdefault(row["article_id"], {**row, "_strict_score": 0.0})
            entry["_strict_score"] += 1.0 / (RRF_K + rank)
    return sorted(fused.values(), key=lambda r: (-r["_strict_score"], r["article_id"]))
