"""Searching the article index: BM25, dense and hybrid queries with the cutoff inside the engine.

``ArticleIndex(root).search(query, cutoff, k=10, mode="hybrid")`` sends one LanceDB query whose
prefilter is ``published_at < cutoff`` (and ``>= since``, ``article_id NOT IN exclude``, ``IN within``), so a
full top-k of eligible articles comes back whenever k exist — never a post-filtered top-k. Every
hit is checked against its cutoff before it leaves this module (``LeakageError``); undated
articles are not in the index at all. Modes: ``bm25`` (LanceDB's full-text index), ``dense``
(cosine similarity of MiniLM embeddings; exact search below ``ANN_MIN_ROWS`` rows, an IVF-PQ
index above) and ``hybrid`` (both lists fused by reciprocal rank, ``rrf_k`` = 60).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from udfs import storage
from udfs.index_docs import eligible, quoted_list
from udfs.layout import Layout
from udfs.retrieval import Hit, LeakageError, check_hits
from udfs.schemas import ARTICLES
from udfs.timeutil import to_utc

MODES = ("bm25", "dense", "hybrid")
# Hybrid queries project their sub-queries' score columns implicitly, which lance warns about on
# every query; its warnings are kept out of the logs unless asked for.
os.environ.setdefault("LANCEDB_LOG", "error")
TABLE = "articles"
UNDATED = "__HIVE_DEFAULT_PARTITION__"  # the partition of articles with no publication date


@dataclass(frozen=True)
class IndexHit(Hit):
    """A hit with what a person needs to judge it."""

    host: str | None = None
    title: str | None = None


def connect(root: str):
    """The LanceDB database of ``root``'s index (a path or ``s3://``; S3 through the same
    endpoint and credentials as s3fs, ``AWS_ENDPOINT_URL`` included)."""
    import lancedb

    uri = Layout(root).index()
    if not storage.is_s3(uri):
        return lancedb.connect(storage.local_path(uri))
    options = {"allow_http": "true"} if os.environ.get("AWS_ENDPOINT_URL", "").startswith("http:") else {}
    for env, key in (
        ("AWS_ENDPOINT_URL", "aws_endpoint"),
        ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        ("AWS_DEFAULT_REGION", "aws_region"),
    ):
        if os.environ.get(env):
            options[key] = os.environ[env]
    return lancedb.connect(storage.normalize_uri(uri), storage_options=options)


def has_index(root: str) -> bool:
    """Whether ``root`` holds a built article index."""
    return TABLE in connect(root).list_tables().tables


class ArticleIndex:
    """One open handle on the index table (open one per process or actor, query many times)."""

    def __init__(self, root: str, encoder: str | None = None) -> None:
        self.root = root
        self.table = connect(root).open_table(TABLE)
        self.encoder = encoder or self.table.schema.metadata.get(b"encoder", b"").decode() or None

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
    ) -> list[IndexHit]:
        """The top ``k`` articles published in ``[since, cutoff)`` for ``query``, best first;
        never one of ``exclude``, only ones of ``within`` when given, and no marked near-duplicate
        when ``distinct``."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if within is not None and not within:
            return []
        where = eligible(cutoff, since, exclude, within, distinct)
        rows = self._query(query, mode).where(where, prefilter=True).limit(k).to_list()
        hits = [
            IndexHit(
                doc_id=r["article_id"],
                published_at=r["published_at"],
                score=float(_score(r)),
                rank=rank,
                host=r["host"],
                title=r["title"],
            )
            for rank, r in enumerate(rows, 1)
        ]
        if any(h.published_at is None for h in hits):
            raise LeakageError(f"an undated article came back for cutoff {cutoff}")
        check_hits(hits, cutoff)
        if since is not None and any(h.published_at < to_utc(since) for h in hits):
            raise LeakageError(f"an article before --since {since} came back")
        return hits

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
        parts = [
            storage.read_table(
                storage.join(ARTICLES.uri(self.root), f"published_date={day}"),
                ARTICLES.file_schema,
                columns=columns,
                filter=ours,
            )
            for day in days
        ]
        return pa.concat_tables(parts)

    def _query(self, query: str, mode: str) -> Any:
        columns = ["article_id", "published_at", "host", "title"]
        if mode == "bm25":
            return self.table.search(query, query_type="fts").select([*columns, "_score"])
        vector = self._embed(query)
        if mode == "dense":
            search = self.table.search(vector, query_type="vector").distance_type("cosine")
            return search.select([*columns, "_distance"])
        from lancedb.rerankers import RRFReranker

        return (
            self.table.search(query_type="hybrid")
            .vector(vector)
            .text(query)
            .distance_type("cosine")
            .rerank(RRFReranker())
            .select(columns)
        )

    def _embed(self, query: str):
        from udfs.embeddings import DEFAULT_ENCODER, embed

        return embed([query], self.encoder or DEFAULT_ENCODER)[0]


def _score(row: dict) -> float:
    """Higher is better in every mode (a cosine distance becomes a similarity)."""
    if "_relevance_score" in row:
        return row["_relevance_score"]
    if "_distance" in row:
        return 1.0 - row["_distance"]
    return row["_score"]
