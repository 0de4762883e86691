"""Searching the article index: BM25, dense, hybrid and TF-IDF queries with the cutoff inside the engine.

``ArticleIndex(root).search(query, cutoff, k=10, mode="hybrid")`` sends LanceDB queries whose
prefilter is ``published_at < cutoff`` (and ``>= since``, ``article_id NOT IN exclude``, ``IN within``),
so a full top-k of eligible articles comes back whenever k exist — never a post-filtered top-k.
Every hit is checked against its cutoff before it leaves this module (``LeakageError``); undated
articles are not in the index at all. Modes: ``bm25`` (LanceDB's full-text index on ``text``),
``dense`` (cosine similarity of the table's embeddings; exact below ``ANN_MIN_ROWS`` rows, IVF-PQ
above), ``hybrid`` (the bm25 and dense top k fused by reciprocal rank) and ForecastQA's two
others: ``bm25_title`` (LanceDB's multi-match over the full-text indexes on ``title`` and
``text``, best field wins, a title match counting ``TITLE_BOOST`` times: ES ``multi_match``
best_fields over ``["title^1.25", "body"]``) and ``tfidf`` (DrQA's). ForecastQA's DPR is
``dense``: pre-trained DPR weights are not available, so the index's bi-encoder stands in.

What the engine has no scorer for is computed here over a **pool**: ``tfidf`` and strict BM25
take the engine's full-text top ``pool_size(k)`` eligible articles and rescore them under the
window's statistics (``statistics.WindowStatistics``: no article at or after the cutoff counts)
with ``udfs.scoring``, keeping the k best (ties: document id; a score of 0 is left out). Scores
are exact for the pool; an article outside it cannot come back. Hybrid strict fuses the strict
ranking with the dense one, each over the pool depth.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.index.modes import MODES, TITLE_BOOST, check_mode, pool_size, rescored, score
from pipelines.index.statistics import WindowStatistics
from pipelines.index.tables import (
    TABLE,
    connect,
    has_index,
    has_title_index,
    has_vectors,
    passage_table,
    require_index,
)
from udfs.cli import InputError
from udfs.index_docs import eligible, quoted_list, terms, timestamp_literal
from udfs.retrieval import Hit, LeakageError, check_hits
from udfs.schemas import ARTICLES, HIVE_NULL
from udfs.scoring import bm25_scores, rrf, tfidf_scores
from udfs.timeutil import to_utc

# the searching API (the index's location helpers from ``tables`` are part of it)
__all__ = ["MODES", "TABLE", "TITLE_BOOST", "ArticleIndex", "IndexHit", "has_index", "has_title_index"]
__all__ += ["passage_table", "pool_size", "require_index"]
# engine queries in flight at once in ``search_many`` (measured on 2 cores: 1 → 3.4 ms a query,
# 4 → 1.6 ms; more gains nothing)
CONCURRENCY = 4
UNDATED = HIVE_NULL  # the partition of articles with no publication date
VECTOR_IDS = 1000  # article ids in one ``vectors`` query (the IN list of its filter)
EVIDENCE_POOL = 50  # full-text hits a judge's evidence is chosen from (``nearest``)


@dataclass(frozen=True)
class IndexHit(Hit):
    """A hit with what a person needs to judge it."""

    host: str | None = None
    title: str | None = None
    text: str | None = None  # the passage (passage tables) or the indexed title + lead


class ArticleIndex:
    """One open handle on an index table — the articles, or the passages of one size — (open one
    per process or actor, query many times)."""

    def __init__(self, root: str, table: str = TABLE, prewarm: bool = False) -> None:
        """``prewarm`` loads the full-text and B-tree indexes into memory now rather than piece
        by piece as queries need them: for a handle that answers many queries."""
        from lancedb.background_loop import LOOP

        self.root = root
        db = connect(root)
        if table not in db.list_tables().tables:
            raise FileNotFoundError(
                f"no index table {table!r} at {root}: run python -m pipelines.index --root {root}"
                + (f" --passage-words {table.rsplit('_', 1)[1]}" if table.startswith("passages_") else "")
            )
        self.db, self.name = db, table
        self.table = db.open_table(table)
        self.passages = table != TABLE
        self.embedded = has_vectors(self.table)  # a passage table has them when built with --passage-vectors
        self.encoder = self.table.schema.metadata.get(b"encoder", b"").decode() or None
        self._statistics = WindowStatistics(db) if not self.passages else None
        self._title_index = False  # whether ``title`` has a full-text index (asked until it has)
        # the async table behind the sync handle: a bm25 or dense search makes one trip to
        # LanceDB's event loop through it, where the sync query builder makes several
        self._async, self._loop = self.table._table, LOOP
        if prewarm:
            for index in self.table.list_indices():
                if index.index_type in ("FTS", "BTree"):
                    self.table.prewarm_index(index.name)

    def search(
        self,
        query: str,
        cutoff: dt.date | dt.datetime,
        k: int = 10,
        mode: str = "hybrid",
        since: dt.date | dt.datetime | None = None,
        exclude: Collection[str] = (),
        within: Collection[str] | None = None,
        distinct: bool = False,
        strict: bool = False,
        text: bool = True,
    ) -> list[IndexHit]:
        """The top ``k`` articles (passages) published in ``[since, cutoff)`` for ``query``, best
        first; never one of ``exclude``, only ones of ``within`` when given (both article ids), no
        marked near-duplicate when ``distinct``; with ``strict``, BM25 uses term statistics of
        the window's articles only (``WindowStatistics``; ``tfidf`` always does). Without
        ``text``, a hit carries no host, title or text, which the engine then does not read where
        it can (for callers that want ids: fewer columns of each hit fetched)."""
        self.check(mode, strict)
        if within is not None and not within:
            return []
        if strict or mode == "tfidf":  # kept for whole articles: a passage table fails here, before any query
            self.statistics()
        where = eligible(cutoff, since, exclude, within, distinct)
        if rescored(mode, strict):
            rows = self._rescore(query, cutoff, since, where, k, mode, text)
        else:
            rows = self._loop.run(self._ranked(self._target(query, mode), mode, where, k, text))
        return self._checked(rows, cutoff, since)

    def search_many(
        self,
        queries: Sequence[tuple[str, dt.date | dt.datetime, dt.date | dt.datetime | None]],
        k: int = 10,
        mode: str = "bm25",
        strict: bool = False,
        text: bool = True,
        distinct: bool = False,
    ) -> list[list[IndexHit]]:
        """``search`` for each ``(query, cutoff, since)``, hits in the order of ``queries``. BM25 and
        dense searches run ``CONCURRENCY`` at a time in the engine, whose threads then stay busy
        (about twice the queries per second of one by one on two cores; query vectors are
        embedded in one batch), hybrid ones too (their two lists each); tfidf and strict ones run
        one after another. ``text`` and ``distinct`` as in ``search`` (the batched retrieval
        stage writes ids, scores and times only)."""
        self.check(mode, strict)
        if rescored(mode, strict):
            return [
                self.search(q, cutoff, k, mode, since=since, distinct=distinct, strict=strict, text=text)
                for q, cutoff, since in queries
            ]
        # query vectors (one batch) and full-text queries, made here: a sync LanceDB call inside
        # the engine's event loop (the title index check) would wait on that loop forever
        texts = [q for q, _, _ in queries]
        vectors = list(self.embed(texts)) if mode in ("dense", "hybrid") and texts else [None] * len(texts)
        targets = [
            (vector, None if mode == "dense" else self._text_query(q, mode))
            for q, vector in zip(texts, vectors, strict=True)
        ]

        async def fetch_all() -> list[list[dict[str, Any]]]:
            gate = asyncio.Semaphore(CONCURRENCY)

            async def one(target: tuple, where: str) -> list[dict[str, Any]]:
                async with gate:
                    return await self._ranked(target, mode, where, k, text)

            return await asyncio.gather(
                *(
                    one(target, eligible(cutoff, since, (), None, distinct))
                    for (_, cutoff, since), target in zip(queries, targets, strict=True)
                )
            )

        rows = self._loop.run(fetch_all()) if queries else []
        return [self._checked(r, cutoff, since) for r, (_, cutoff, since) in zip(rows, queries, strict=True)]

    def _checked(
        self, rows: list[dict[str, Any]], cutoff: dt.date | dt.datetime, since: dt.date | dt.datetime | None
    ) -> list[IndexHit]:
        """The hits of one search's rows, each asserted dated, before ``cutoff`` and not before ``since``."""
        hits = [self._hit(r, rank) for rank, r in enumerate(rows, 1)]
        if any(h.published_at is None for h in hits):
            raise LeakageError(f"an undated article came back for cutoff {cutoff}")
        check_hits(hits, cutoff)
        if since is not None and any(h.published_at < to_utc(since) for h in hits):
            raise LeakageError(f"an article before --since {since} came back")
        return hits

    def check(self, mode: str, strict: bool = False) -> None:
        """Refuse, before any query, a search this table cannot answer: an unknown mode, a strict
        ``bm25_title``, or a dense or hybrid search of a passage table built without vectors."""
        check_mode(mode, strict)
        if mode in ("dense", "hybrid") and not self.embedded:
            raise InputError(
                f"the index table {self.name} at {self.root} has no vectors (its passages are indexed "
                f"for full-text search only), which {mode} search needs: run python -m pipelines.index "
                f"--root {self.root} --passage-vectors {self.name.rsplit('_', 1)[1]} to embed them"
            )

    def nearest(self, query: str, start: dt.datetime, end: dt.datetime | None, k: int) -> list[IndexHit]:
        """The ``k`` documents most similar to ``query`` (cosine of their embeddings) among its
        full-text top ``EVIDENCE_POOL`` published in ``[start, end]`` (inclusive): as the paper's
        judge ranks the chunks of what its search found. A table without vectors has the pool
        embedded here. For a judge's evidence only: the window lies after a forecast's cutoff on
        purpose."""
        from lancedb.query import MatchQuery

        where = f"published_at >= {timestamp_literal(start)}"
        if end is not None:
            where += f" AND published_at <= {timestamp_literal(end)}"
        columns = [*self._columns(), *["vector"] * self.embedded]
        search = self.table.search(MatchQuery(query, "text"), query_type="fts")
        rows = search.where(where, prefilter=True).select(columns).limit(EVIDENCE_POOL).to_list()
        if not rows:
            return []
        texts = [r["text"] for r in rows]
        vectors = np.asarray([r["vector"] for r in rows]) if self.embedded else self.embed(texts)
        similarity = vectors @ self._embed(query)
        key = "passage_id" if self.passages else "article_id"
        best = sorted(range(len(rows)), key=lambda i: (-similarity[i], rows[i][key]))[:k]
        return [
            self._hit({**rows[i], "_rescored": float(similarity[i])}, rank) for rank, i in enumerate(best, 1)
        ]

    def count(
        self,
        cutoff: dt.date | dt.datetime,
        since: dt.date | dt.datetime | None = None,
        exclude: Collection[str] = (),
        within: Collection[str] | None = None,
        distinct: bool = False,
    ) -> int:
        """How many articles a search with these bounds may return (its eligible set)."""
        if within is not None and not within:
            return 0
        return self.table.count_rows(eligible(cutoff, since, exclude, within, distinct))

    def vectors(self, ids: Sequence[str], start: dt.date, end: dt.date) -> pa.Table:
        """``article_id`` and ``vector`` of the documents of ``ids`` published on the days
        ``[start, end)``: the embeddings one window of TCE formation clusters, computed once by the
        index job. Only the wanted rows are read (``VECTOR_IDS`` ids a query), never the window."""
        days = " AND ".join(
            f"published_at {op} {timestamp_literal(dt.datetime.combine(day, dt.time(), dt.UTC))}"
            for op, day in ((">=", start), ("<", end))
        )
        parts = [
            self.table.search()
            .where(f"{days} AND article_id IN ({quoted_list(chunk)})")
            .select(["article_id", "vector"])
            .limit(len(chunk))
            .to_arrow()
            for chunk in (ids[i : i + VECTOR_IDS] for i in range(0, len(ids), VECTOR_IDS))
        ]
        empty = self.table.schema.empty_table().select(["article_id", "vector"])
        return pa.concat_tables(parts) if parts else empty

    def articles(self, ids: Collection[str], columns: list[str]) -> pa.Table:
        """The corpus rows (``columns`` of ``corpus/articles``) of those of ``ids`` that exist,
        reading only their days' partitions (found in the index; undated ones in the undated
        partition): a question's working set, never the corpus."""
        wanted = sorted(set(ids))
        if not wanted:
            return ARTICLES.file_schema.empty_table().select(columns)
        found = (
            self.table.search()
            .where(f"article_id IN ({quoted_list(wanted)})")
            .select(["article_id", "published_date"])
            .limit(len(wanted))
            .to_arrow()
        )
        days = sorted({d.isoformat() for d in found["published_date"].to_pylist()})
        if len(found) < len(wanted):
            days.append(UNDATED)
        ours = pc.field("article_id").isin(wanted)
        parts = [ARTICLES.read_partition(self.root, day, columns, ours) for day in days]
        return pa.concat_tables(parts)

    def _target(self, query: str, mode: str) -> tuple[Any, Any]:
        """What the engine searches for: (query vector or None, full-text query or None)."""
        vector = self._embed(query) if mode in ("dense", "hybrid") else None
        return vector, None if mode == "dense" else self._text_query(query, mode)

    async def _ranked(self, target: tuple, mode: str, where: str, k: int, text: bool) -> list[dict[str, Any]]:
        """The engine's top ``k`` rows of one search whose prefilter is ``where``: full text,
        dense, or (``hybrid``) both, fused by reciprocal rank."""
        vector, words = target
        if mode != "hybrid":
            return await self._fetch(vector if mode == "dense" else words, mode == "dense", where, k, text)
        lists = await asyncio.gather(
            self._fetch(words, False, where, k, text), self._fetch(vector, True, where, k, text)
        )
        return self._fused(lists)[:k]

    async def _fetch(self, target: Any, dense: bool, where: str, k: int, text: bool) -> list[dict[str, Any]]:
        """One full-text (``target`` a ``_text_query``) or dense (``target`` a query vector) search
        with ``where`` as its prefilter."""
        search = self._async.query()
        columns = self._columns(text)
        if dense:
            search = search.nearest_to(target).distance_type("cosine").select([*columns, "_distance"])
        else:
            search = search.nearest_to_text(target).select([*columns, "_score"])
        return (await search.where(where).limit(k).to_arrow()).to_pylist()

    def _rescore(
        self, query: str, cutoff: Any, since: Any, where: str, k: int, mode: str, text: bool
    ) -> list:
        """The k best eligible articles by TF-IDF or strict BM25 over the engine's full-text pool
        (fused with the dense pool for hybrid), as rows with ``_rescored``."""
        statistics = self.statistics()
        depth = pool_size(k)
        target = self._target(query, "hybrid" if mode == "hybrid" else "bm25")
        fetches = [self._fetch(target[1], False, where, depth, True)]
        if mode == "hybrid":
            fetches.append(self._fetch(target[0], True, where, depth, text))
        pools = self._loop.run(_gather(fetches))
        wanted = sorted(set(terms(query)))
        n, tokens, df = statistics.window(self.table, cutoff, since, wanted)
        texts = [row["text"] for row in pools[0]]
        scores = (
            tfidf_scores(query, texts, df, n) if mode == "tfidf" else bm25_scores(query, texts, df, n, tokens)
        )
        columns = self._columns(text)
        scored = [
            {**{c: row[c] for c in columns}, "_rescored": score}
            for row, score in zip(pools[0], scores, strict=True)
            if score > 0
        ]
        scored.sort(key=lambda r: (-r["_rescored"], r["article_id"]))
        return (self._fused([scored, pools[1]]) if mode == "hybrid" else scored)[:k]

    def _fused(self, lists: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Ranked row lists fused by reciprocal rank (``udfs.scoring.rrf``; ties: document id)."""
        key = "passage_id" if self.passages else "article_id"
        rows = {row[key]: row for ranked in reversed(lists) for row in ranked}
        fused = rrf([[row[key] for row in ranked] for ranked in lists])
        return [
            {**rows[doc], "_rescored": score}
            for doc, score in sorted(fused.items(), key=lambda d: (-d[1], d[0]))
        ]

    def _hit(self, row: dict[str, Any], rank: int) -> IndexHit:
        return IndexHit(
            doc_id=row["passage_id"] if self.passages else row["article_id"],
            published_at=row["published_at"],
            score=float(score(row)),
            rank=rank,
            source_id=row["article_id"] if self.passages else "",
            host=row.get("host"),
            title=row.get("title"),
            text=row.get("text"),
        )

    def _columns(self, text: bool = True) -> list[str]:
        ids = ["passage_id"] * self.passages + ["article_id", "published_at"]
        return [*ids, "host", "title", "text"] if text else ids

    def _text_query(self, query: str, mode: str) -> Any:
        """The full-text query of a mode: ``text`` alone (a plain query would search every
        full-text index, the title's too), or the boosted multi-match of ``bm25_title``."""
        from lancedb.query import MatchQuery, MultiMatchQuery

        if mode == "bm25":
            return MatchQuery(query, "text")
        if not self._title_index:
            self._title_index = has_title_index(self.table)
        if not self._title_index:
            raise InputError(
                f"the index table {self.name!r} at {self.root} has no full-text index on title, which "
                f"bm25_title needs (it was built before that mode existed): run python -m "
                f"pipelines.index --root {self.root} to add it"
            )
        return MultiMatchQuery(query, ["title", "text"], boosts=[TITLE_BOOST, 1.0])

    def statistics(self) -> WindowStatistics:
        """The window statistics of strict and tfidf searches (kept for whole articles only)."""
        if self._statistics is None:
            raise ValueError("strict and tfidf statistics are kept for whole articles, not passages")
        return self._statistics

    def embed(self, texts: list[str]):
        """Query vectors from the encoder the table was built with."""
        from udfs.embeddings import DEFAULT_ENCODER, embed

        return embed(texts, self.encoder or DEFAULT_ENCODER)

    def _embed(self, query: str):
        return self.embed([query])[0]


async def _gather(fetches: list) -> list:
    return await asyncio.gather(*fetches)
