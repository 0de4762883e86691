"""Searching the article index: BM25, dense, hybrid and TF-IDF queries with the cutoff inside the engine.

``ArticleIndex(root).search(query, cutoff, k=10, mode="hybrid")`` sends one LanceDB query whose
prefilter is ``published_at < cutoff`` (and ``>= since``, ``article_id NOT IN exclude``, ``IN within``), so a
full top-k of eligible articles comes back whenever k exist — never a post-filtered top-k. Every
hit is checked against its cutoff before it leaves this module (``LeakageError``); undated
articles are not in the index at all. Modes: ``bm25`` (LanceDB's full-text index on ``text``),
``dense`` (cosine similarity of MiniLM embeddings; exact search below ``ANN_MIN_ROWS`` rows, an
IVF-PQ index above), ``hybrid`` (both lists fused by reciprocal rank, ``rrf_k`` = 60) and
ForecastQA's two others: ``bm25_title`` (LanceDB's multi-match over the full-text indexes on
``title`` and ``text``, best field wins, a title match counting ``TITLE_BOOST`` times: ES
``multi_match`` best_fields over ``["title^1.25", "body"]``) and ``tfidf`` (DrQA's TF-IDF over an
engine pool, ``pipelines.index.tfidf``). ForecastQA's DPR is ``dense``: pre-trained DPR weights are
not available, so the index's bi-encoder is the dense-passage retriever.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.index import tfidf
from pipelines.index.strict import StrictStatistics
from udfs import storage
from udfs.cli import InputError
from udfs.index_docs import eligible, quoted_list, timestamp_literal
from udfs.layout import Layout
from udfs.retrieval import Hit, LeakageError, check_hits
from udfs.schemas import ARTICLES, HIVE_NULL
from udfs.timeutil import to_utc

MODES = ("bm25", "dense", "hybrid", "bm25_title", "tfidf")
TITLE_BOOST = 1.25  # ForecastQA App. E.2: fields ["title^1.25", "body"]
# Hybrid queries project their sub-queries' score columns implicitly, which lance warns about on
# every query; its warnings are kept out of the logs unless asked for.
os.environ.setdefault("LANCEDB_LOG", "error")
TABLE = "articles"
# strict statistics, one row per day (and term): (published_date, term, df), (published_date, docs, tokens)
STATISTICS = ("term_days", "day_sizes")
S3_ENV = {  # environment variable → LanceDB storage option
    "AWS_ENDPOINT_URL": "aws_endpoint",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_DEFAULT_REGION": "aws_region",
}
# engine queries in flight at once in ``search_many`` (measured on 2 cores: 1 → 3.4 ms a query,
# 4 → 1.6 ms; more gains nothing)
CONCURRENCY = 4
UNDATED = HIVE_NULL  # the partition of articles with no publication date
VECTOR_IDS = 1000  # article ids in one ``vectors`` query (the IN list of its filter)


def passage_table(words: int) -> str:
    """The table of passages of at most ``words`` words."""
    return f"passages_{words}"


@dataclass(frozen=True)
class IndexHit(Hit):
    """A hit with what a person needs to judge it."""

    host: str | None = None
    title: str | None = None
    text: str | None = None  # the passage (passage tables) or the indexed title + lead


def connect(root: str):
    """The LanceDB database of ``root``'s index (a path or ``s3://``; S3 through the same
    endpoint and credentials as s3fs, ``AWS_ENDPOINT_URL`` included)."""
    import lancedb

    uri = Layout(root).index()
    if not storage.is_s3(uri):
        return lancedb.connect(storage.local_path(uri))
    options = {"allow_http": "true"} if os.environ.get("AWS_ENDPOINT_URL", "").startswith("http:") else {}
    for env, key in S3_ENV.items():
        if os.environ.get(env):
            options[key] = os.environ[env]
    return lancedb.connect(storage.normalize_uri(uri), storage_options=options)


def has_index(root: str) -> bool:
    """Whether ``root`` holds a built article index (asking creates nothing)."""
    if not storage.exists(Layout(root).index()):
        return False
    return TABLE in connect(root).list_tables().tables


def require_index(root: str) -> None:
    """An ``InputError`` that says how to build the index when ``root`` has none."""
    if not has_index(root):
        raise InputError(f"no article index at {root}: run python -m pipelines.index --root {root} first")


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
        self.encoder = self.table.schema.metadata.get(b"encoder", b"").decode() or None
        self._strict = StrictStatistics(db) if not self.passages else None
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
        the window's articles only (``StrictStatistics``; ``tfidf`` always does). Without
        ``text``, a hit of any mode but strict carries no host, title or text, which the engine
        then does not read (for callers that want ids: fewer columns of each hit fetched)."""
        _check_mode(mode, strict)
        if within is not None and not within:
            return []
        # window statistics exist for whole articles only: a passage table fails here, before any query
        statistics = self.statistics() if strict or mode == "tfidf" else None
        where = eligible(cutoff, since, exclude, within, distinct)
        if mode == "tfidf":
            rows = tfidf.rank(self, statistics, query, cutoff, since, where, k, text)
        elif statistics is not None and mode != "dense":
            rows = statistics.rank(self, query, cutoff, since, where, k, mode)
        elif mode == "hybrid":
            rows = self.query(query, mode, text).where(where, prefilter=True).limit(k).to_list()
        else:
            target = self._embed(query) if mode == "dense" else self._text_query(query, mode)
            rows = self._loop.run(self._fetch(target, mode == "dense", where, k, text))
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
        (about twice the queries per second of one by one on two cores; dense queries are also
        embedded in one batch); hybrid, tfidf and strict ones run one after another. ``text`` and
        ``distinct`` as in ``search`` (the batched retrieval stage writes ids, scores and times only)."""
        _check_mode(mode, strict)
        if mode in ("hybrid", "tfidf") or (strict and mode != "dense"):
            return [
                self.search(q, cutoff, k, mode, since=since, distinct=distinct, strict=strict, text=text)
                for q, cutoff, since in queries
            ]
        # query vectors or full-text queries, made here: a sync LanceDB call inside the engine's
        # event loop (the title index check) would wait on that loop forever
        texts = [q for q, _, _ in queries]
        targets = list(self.embed(texts)) if mode == "dense" else [self._text_query(q, mode) for q in texts]

        async def fetch_all() -> list[list[dict[str, Any]]]:
            gate = asyncio.Semaphore(CONCURRENCY)

            async def one(target: Any, where: str) -> list[dict[str, Any]]:
                async with gate:
                    return await self._fetch(target, mode == "dense", where, k, text)

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

    def nearest(self, vector, start: dt.datetime, end: dt.datetime | None, k: int) -> list[IndexHit]:
        """The ``k`` documents closest to ``vector`` published in ``[start, end]`` (inclusive).
        For a judge's evidence only: the window lies after a forecast's cutoff on purpose."""
        where = f"published_at >= {timestamp_literal(start)}"
        if end is not None:
            where += f" AND published_at <= {timestamp_literal(end)}"
        search = self.table.search(vector, query_type="vector").distance_type("cosine")
        rows = search.where(where, prefilter=True).select([*self._columns(), "_distance"]).limit(k).to_list()
        return [self._hit(r, rank) for rank, r in enumerate(rows, 1)]

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
        return (
            pa.concat_tables(parts)
            if parts
            else self.table.schema.empty_table().select(["article_id", "vector"])
        )

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

    def _hit(self, row: dict[str, Any], rank: int) -> IndexHit:
        return IndexHit(
            doc_id=row["passage_id"] if self.passages else row["article_id"],
            published_at=row["published_at"],
            score=float(_score(row)),
            rank=rank,
            source_id=row["article_id"] if self.passages else "",
            host=row.get("host"),
            title=row.get("title"),
            text=row.get("text"),
        )

    def _columns(self, text: bool = True) -> list[str]:
        ids = ["passage_id"] * self.passages + ["article_id", "published_at"]
        return [*ids, "host", "title", "text"] if text else ids

    def query(self, query: str, mode: str, text: bool = True) -> Any:
        """The engine query of one mode, before its prefilter and limit."""
        columns = self._columns(text)
        if mode in ("bm25", "bm25_title"):
            search = self.table.search(self._text_query(query, mode), query_type="fts")
            return search.select([*columns, "_score"])
        vector = self._embed(query)
        if mode == "dense":
            search = self.table.search(vector, query_type="vector").distance_type("cosine")
            return search.select([*columns, "_distance"])
        from lancedb.rerankers import RRFReranker

        return (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(self._text_query(query, "bm25"))
            .distance_type("cosine")
            .rerank(RRFReranker())
            .select(columns)
        )

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

    def statistics(self) -> StrictStatistics:
        """The window statistics of strict and tfidf searches (kept for whole articles only)."""
        if self._strict is None:
            raise ValueError("strict and tfidf statistics are kept for whole articles, not passages")
        return self._strict

    def embed(self, texts: list[str]):
        """Query vectors from the encoder the table was built with."""
        from udfs.embeddings import DEFAULT_ENCODER, embed

        return embed(texts, self.encoder or DEFAULT_ENCODER)

    def _embed(self, query: str):
        return self.embed([query])[0]


def has_title_index(table) -> bool:
    """Whether ``table`` has the full-text index on ``title`` that ``bm25_title`` searches."""
    return any(i.index_type == "FTS" and list(i.columns) == ["title"] for i in table.list_indices())


def _check_mode(mode: str, strict: bool) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if strict and mode == "bm25_title":
        raise ValueError("strict statistics are kept for the text field, so bm25_title has no strict form")


def _score(row: dict) -> float:
    """Higher is better in every mode (a cosine distance becomes a similarity)."""
    if "_strict_score" in row:
        return row["_strict_score"]
    if "_relevance_score" in row:
        return row["_relevance_score"]
    if "_distance" in row:
        return 1.0 - row["_distance"]
    return row["_score"]
