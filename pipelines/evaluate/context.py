"""What a forecaster may read: retrieved articles with the cutoff inside the search, or the gold
articles in the (non-forecasting) gold-context mode.

Searches go to the article index (``pipelines.index``: the cutoff is a prefilter inside the
engine query; chunked settings search its passage table of that size; strict settings use window
statistics). Every context is checked twice (spec R2): the index checks its hits, and
``check_context`` checks them again against the articles table's own dates and the item's gold
articles — a failure raises ``LeakageError`` and aborts the run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipelines.index.engine import TABLE, ArticleIndex, IndexHit, passage_table, require_index
from udfs import retrieval
from udfs.cli import InputError
from udfs.retrieval import Hit, LeakageError
from udfs.text import first_words
from udfs.timeutil import to_utc

# the index's modes (pipelines.index.engine.MODES); ForecastQA's three: bm25_title (its paper's
# BM25, title matches boosted 1.25x), tfidf (DrQA-style) and dense (DPR-style: the index's bi-encoder)
RETRIEVERS = ("bm25", "dense", "hybrid", "bm25_title", "tfidf")


@dataclass(frozen=True)
class RetrievalConfig:
    """How one benchmark's retrieval mode searches (defaults: ``PAPER_RETRIEVAL``)."""

    k: int = 5
    doc_words: int = 512  # each article (or chunk) shown cut to its first N words
    chunk_words: int | None = None  # search the index's passages of N words instead of whole articles
    since: dt.date | None = None  # lower bound of the accessible window (inclusive)
    rag_cutoff: dt.date | None = None  # Daily Oracle's R: the cutoff is min(t_cut, R)
    strict: bool = False  # BM25 statistics from the eligible window only (pipelines.index.strict)

    def __post_init__(self) -> None:
        if self.k < 1 or self.doc_words < 1 or (self.chunk_words is not None and self.chunk_words < 1):
            raise ValueError("k, doc_words and chunk_words must be positive")


# The papers' settings per benchmark ("*" for any other benchmark).
PAPER_RETRIEVAL: dict[str, RetrievalConfig] = {
    "*": RetrievalConfig(),
    # ForecastQA §6.1: top 10, question as the query; its paper retriever is --retrievers
    # bm25_title (App. E.2), tfidf and dense its alternatives (Table 4)
    "forecastqa": RetrievalConfig(k=10),
    "daily_oracle": RetrievalConfig(  # Daily Oracle §5: top 5, 512 words, [2019-01-01, ...)
        k=5, doc_words=512, since=retrieval.DAILY_ORACLE_START, strict=True
    ),
    "tcelongbench": RetrievalConfig(k=3, doc_words=512, chunk_words=512),  # u = 3 chunks of 512
    "prophet": RetrievalConfig(k=10),  # N = 10 inside the question's kept evidence set
}


def retrieval_config(
    benchmark: str, table: dict[str, RetrievalConfig], override: dict[str, Any]
) -> RetrievalConfig:
    """A benchmark's settings with the run's overrides applied on top."""
    base = table.get(benchmark, table.get("*", RetrievalConfig()))
    return dataclasses.replace(base, **override) if override else base


@dataclass(frozen=True)
class Context:
    """The documents a forecaster sees, oldest first, with the retrieval log of R2."""

    docs: list[dict[str, str]]  # {date, title, text} for the prompt
    ids: list[str]  # article ids (passage ids for passage tables)
    dates: list[dt.datetime | None]
    n_eligible: int | None


class Corpus:
    """What the evaluation reads of the corpus: searches go to the article index (one open
    handle per table, reused for every item) and the articles shown are fetched by id from their
    day partitions, so a run holds one item's working set, never the corpus."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._tables: dict[str, ArticleIndex] = {}

    @classmethod
    def load(cls, root: str) -> Corpus:
        require_index(root)
        return cls(root)

    def table(self, name: str = TABLE) -> ArticleIndex:
        """The open handle on one index table (the articles, or passages of one size)."""
        if name not in self._tables:
            self._tables[name] = ArticleIndex(self.root, name)
        return self._tables[name]

    def articles(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The corpus rows (title, text, publication time) of those of ``ids`` that exist."""
        rows = self.table().articles(ids, ["article_id", "title", "text", "published_at"])
        return {r["article_id"]: r for r in rows.to_pylist()}

    def retrieve(self, item: dict[str, Any], retriever: str, rc: RetrievalConfig) -> Context:
        """Top-k eligible documents for an item: published in ``[since, min(t_cut, R))``, never
        a gold article, inside the item's fixed article set when it has one."""
        check_retriever(retriever, rc)
        index = self.table(passage_table(rc.chunk_words) if rc.chunk_words else TABLE)
        cutoff = effective_cutoff(item["t_cut"], rc)
        within = set(item.get("context_article_ids") or []) or None
        exclude = set(item.get("gold_article_ids") or [])
        strict = rc.strict and retriever != "dense"
        hits = index.search(  # the articles' own rows are read below; a passage brings its text
            query_text(item),
            cutoff,
            rc.k,
            retriever,
            rc.since,
            exclude,
            within,
            strict=strict,
            text=index.passages,
        )
        articles = self.articles([h.source_id or h.doc_id for h in hits])
        check_context(item, hits, articles, cutoff)
        hits = sorted(hits, key=lambda h: (h.published_at, h.rank))  # oldest first (ForecastQA R4, ours)
        return Context(
            docs=[_doc(h, articles[h.source_id or h.doc_id], rc.doc_words) for h in hits],
            ids=[h.doc_id for h in hits],
            dates=[h.published_at for h in hits],
            n_eligible=index.count(cutoff, rc.since, exclude, within),
        )

    def gold(self, item: dict[str, Any], doc_words: int) -> Context | None:
        """The item's gold articles (gold-context mode, exempt from the cutoff); None when it
        has none in the corpus."""
        articles = self.articles(list(item.get("gold_article_ids") or []))
        if not articles:
            return None
        last = to_utc(dt.datetime.max.replace(tzinfo=dt.UTC))
        found = sorted(articles, key=lambda a: (articles[a]["published_at"] or last, a))
        return Context(
            docs=[
                {
                    "date": articles[a]["published_at"].date().isoformat()
                    if articles[a]["published_at"]
                    else "undated",
                    "title": articles[a]["title"] or "",
                    "text": first_words(articles[a]["text"], doc_words),
                }
                for a in found
            ],
            ids=found,
            dates=[articles[a]["published_at"] for a in found],
            n_eligible=None,
        )


def _doc(hit: IndexHit, article: dict[str, Any], doc_words: int) -> dict[str, str]:
    """A retrieved document as the prompt shows it: a passage shows itself, an article its body."""
    body = hit.text if hit.source_id else article["text"]
    return {
        "date": hit.published_at.date().isoformat(),
        "title": article["title"] or "",
        "text": first_words(body or "", doc_words),
    }


def check_retriever(retriever: str, rc: RetrievalConfig) -> None:
    """Refuse, before any search, a retriever these settings cannot run: ``tfidf`` needs the
    articles' statistics (not a passage table), ``bm25_title`` has no strict form."""
    if retriever not in RETRIEVERS:
        raise ValueError(f"retriever must be one of {RETRIEVERS}")
    if retriever == "tfidf" and rc.chunk_words:
        raise InputError("the tfidf retriever searches whole articles: it cannot run with chunk_words")
    if retriever == "bm25_title" and rc.strict:
        raise InputError("the bm25_title retriever has no strict statistics: use bm25 for strict settings")


def effective_cutoff(t_cut: dt.datetime, rc: RetrievalConfig) -> dt.datetime:
    """``min(t_cut, R)``: the RAG cutoff caps the item's own cutoff."""
    cut = to_utc(t_cut)
    return min(cut, to_utc(rc.rag_cutoff)) if rc.rag_cutoff else cut


def query_text(item: dict[str, Any]) -> str:
    """The search query: the question (ForecastQA §6.1); ordering items add their choices
    (TCELongBench's retrieve-once); without a question, the last background lines."""
    parts = [item.get("question") or ""]
    if item["type"] == "ordering":
        parts += list(item.get("choices") or [])
    if not parts[0].strip():
        parts += list(item.get("background") or [])[-3:]
    return " ".join(p for p in parts if p).strip()


def check_context(
    item: dict[str, Any], hits: list[Hit], articles: dict[str, dict[str, Any]], cutoff: dt.datetime
) -> None:
    """The second leakage check (R2b): every retrieved article, by the articles table's own
    date, was published before the cutoff, and none is a gold article of the item."""
    gold = set(item.get("gold_article_ids") or [])
    for hit in hits:
        article_id = hit.source_id or hit.doc_id
        article = articles.get(article_id)
        if article is None or article["published_at"] is None:
            raise LeakageError(f"{item['item_id']}: retrieved {article_id}, which has no publication date")
        if to_utc(article["published_at"]) >= cutoff:
            raise LeakageError(
                f"{item['item_id']}: retrieved {article_id} published {article['published_at'].isoformat()}, "
                f"at or after the cutoff {cutoff.isoformat()}"
            )
        if article_id in gold:
            raise LeakageError(f"{item['item_id']}: retrieved its own gold article {article_id}")
