"""What a forecaster may read: retrieved articles with the cutoff inside the search, or the gold
articles in the (non-forecasting) gold-context mode.

Indexes are built once per run over the dated articles (one per retriever, chunk size and
strictness) and serve every cutoff. Every context is checked twice (spec R2): ``udfs.retrieval``
checks its hits, and ``check_context`` checks them again against the articles table's own dates
and the item's gold articles — a failure raises ``LeakageError`` and aborts the run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from udfs import retrieval
from udfs.retrieval import BM25Index, DenseIndex, Hit, HybridIndex, LeakageError
from udfs.schemas import ARTICLES
from udfs.timeutil import to_utc

RETRIEVERS = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class RetrievalConfig:
    """How one benchmark's retrieval mode searches (defaults: ``PAPER_RETRIEVAL``)."""

    k: int = 5
    doc_words: int = 512  # each article (or chunk) shown cut to its first N words
    chunk_words: int | None = None  # index chunks of N words instead of whole articles
    since: dt.date | None = None  # lower bound of the accessible window (inclusive)
    rag_cutoff: dt.date | None = None  # Daily Oracle's R: the cutoff is min(t_cut, R)
    strict: bool = False  # BM25 statistics from the eligible window only (one index per window)

    def __post_init__(self) -> None:
        if self.k < 1 or self.doc_words < 1 or (self.chunk_words is not None and self.chunk_words < 1):
            raise ValueError("k, doc_words and chunk_words must be positive")


# The papers' settings per benchmark ("*" for any other benchmark).
PAPER_RETRIEVAL: dict[str, RetrievalConfig] = {
    "*": RetrievalConfig(),
    "forecastqa": RetrievalConfig(k=10),  # ForecastQA §6.1: top 10, question as the query
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


@dataclass
class Article:
    published_at: dt.datetime | None
    title: str
    text: str


@dataclass(frozen=True)
class Context:
    """The documents a forecaster sees, oldest first, with the retrieval log of R2."""

    docs: list[dict[str, str]]  # {date, title, text} for the prompt
    ids: list[str]  # article ids (chunk ids for chunked indexes)
    dates: list[dt.datetime | None]
    n_eligible: int | None


class Corpus:
    """The articles table in memory, and the indexes built over its dated articles."""

    def __init__(self, articles: dict[str, Article]):
        self.articles = articles
        self._indexes: dict[tuple, Any] = {}

    @classmethod
    def load(cls, root: str) -> Corpus:
        table = ARTICLES.read(root, columns=["article_id", "title", "text", "published_at"])
        return cls(
            {
                r["article_id"]: Article(r["published_at"], r["title"] or "", r["text"] or "")
                for r in table.to_pylist()
            }
        )

    def __len__(self) -> int:
        return len(self.articles)

    def _documents(self, chunk_words: int | None) -> tuple[list, list, list, list | None]:
        dated = sorted(k for k, a in self.articles.items() if a.published_at is not None)
        texts = [f"{self.articles[k].title}\n{self.articles[k].text}" for k in dated]
        stamps = [self.articles[k].published_at for k in dated]
        if chunk_words is None:
            return dated, stamps, texts, None
        ids, dates, chunks, sources = retrieval.chunk_documents(dated, stamps, texts, chunk_words)
        return ids, dates, chunks, sources

    def index(self, retriever: str, rc: RetrievalConfig):
        """The (cached) index of one retriever over the dated articles or their chunks."""
        if retriever not in RETRIEVERS:
            raise ValueError(f"retriever must be one of {RETRIEVERS}")
        strict = rc.strict and retriever != "dense"
        key = (retriever, rc.chunk_words, strict)
        if key not in self._indexes:
            ids, stamps, texts, sources = self._documents(rc.chunk_words)
            if retriever == "bm25":
                built: Any = BM25Index(ids, stamps, texts, strict=strict, sources=sources)
            elif retriever == "dense":
                built = DenseIndex(ids, stamps, texts, sources=sources)
            else:
                built = HybridIndex(
                    self.index("bm25", rc),
                    self.index("dense", dataclasses.replace(rc, strict=False)),
                )
            self._indexes[key] = built
        return self._indexes[key]

    def retrieve(self, item: dict[str, Any], retriever: str, rc: RetrievalConfig) -> Context:
        """Top-k eligible documents for an item: published in ``[since, min(t_cut, R))``, never
        a gold article, inside the item's fixed article set when it has one."""
        index = self.index(retriever, rc)
        cutoff = effective_cutoff(item["t_cut"], rc)
        within = set(item.get("context_article_ids") or []) or None
        exclude = set(item.get("gold_article_ids") or [])
        hits = index.search(query_text(item), cutoff, rc.k, exclude=exclude, since=rc.since, within=within)
        check_context(item, hits, self, cutoff)
        eligible = int(index.corpus.mask(cutoff, rc.since, exclude, within).sum())
        hits = sorted(hits, key=lambda h: (h.published_at, h.rank))  # oldest first (ForecastQA R4, ours)
        return Context(
            docs=[self._doc(index, h, rc) for h in hits],
            ids=[h.doc_id for h in hits],
            dates=[h.published_at for h in hits],
            n_eligible=eligible,
        )

    def _doc(self, index: Any, hit: Hit, rc: RetrievalConfig) -> dict[str, str]:
        article = self.articles[hit.source_id or hit.doc_id]
        body = index.corpus.text(hit.doc_id) if hit.source_id else article.text  # a chunk shows itself
        return {
            "date": hit.published_at.date().isoformat(),
            "title": article.title,
            "text": retrieval.first_words(body, rc.doc_words),
        }

    def gold(self, item: dict[str, Any], doc_words: int) -> Context | None:
        """The item's gold articles (gold-context mode, exempt from the cutoff); None when it
        has none in the corpus."""
        ids = [a for a in item.get("gold_article_ids") or [] if a in self.articles]
        if not ids:
            return None
        found = sorted(ids, key=lambda a: (self.articles[a].published_at or to_utc(dt.date.max), a))
        return Context(
            docs=[
                {
                    "date": self.articles[a].published_at.date().isoformat()
                    if self.articles[a].published_at
                    else "undated",
                    "title": self.articles[a].title,
                    "text": retrieval.first_words(self.articles[a].text, doc_words),
                }
                for a in found
            ],
            ids=found,
            dates=[self.articles[a].published_at for a in found],
            n_eligible=None,
        )


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


def check_context(item: dict[str, Any], hits: list[Hit], corpus: Corpus, cutoff: dt.datetime) -> None:
    """The second leakage check (R2b): every retrieved article, by the articles table's own
    date, was published before the cutoff, and none is a gold article of the item."""
    gold = set(item.get("gold_article_ids") or [])
    for hit in hits:
        article_id = hit.source_id or hit.doc_id
        article = corpus.articles.get(article_id)
        if article is None or article.published_at is None:
            raise LeakageError(f"{item['item_id']}: retrieved {article_id}, which has no publication date")
        if to_utc(article.published_at) >= cutoff:
            raise LeakageError(
                f"{item['item_id']}: retrieved {article_id} published {article.published_at.isoformat()}, "
                f"at or after the cutoff {cutoff.isoformat()}"
            )
        if article_id in gold:
            raise LeakageError(f"{item['item_id']}: retrieved its own gold article {article_id}")
