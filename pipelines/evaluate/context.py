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
from udfs.evaluate import long_context, within
from udfs.retrieval import Hit, LeakageError, check_hits
from udfs.text import first_words
from udfs.timeutil import to_utc

# the index's modes (pipelines.index.engine.MODES) — ForecastQA's three are bm25_title (its
# paper's BM25, title matches boosted 1.25x), tfidf (DrQA-style) and dense (DPR-style: the
# index's bi-encoder) — and the choices inside an item's own set (udfs.evaluate.within)
RETRIEVERS = ("bm25", "dense", "hybrid", "bm25_title", "tfidf", *within.SCORED)


@dataclass(frozen=True)
class RetrievalConfig:
    """How one benchmark's retrieval mode searches (the papers' settings: ``IMPORTED_RETRIEVAL``
    and each builder's own, ``pipelines.evaluate.run.paper_retrieval``)."""

    k: int = 5
    doc_words: int = 512  # each article (or chunk) shown cut to its first N words
    chunk_words: int | None = None  # search the index's passages of N words instead of whole articles
    since: dt.date | None = None  # lower bound of the accessible window (inclusive)
    rag_cutoff: dt.date | None = None  # Daily Oracle's R: the cutoff is min(t_cut, R)
    strict: bool = False  # BM25 statistics from the eligible window only (pipelines.index.engine)
    # show each article's LLM summary instead of its text (PROPHET §5); ``dense`` then ranks the
    # item's articles by their summaries (naive RAG) instead of searching the index
    summaries: bool = False

    def __post_init__(self) -> None:
        if self.k < 1 or self.doc_words < 1 or (self.chunk_words is not None and self.chunk_words < 1):
            raise ValueError("k, doc_words and chunk_words must be positive")


# The papers' settings of the benchmarks no builder of the kit writes ("*": any other benchmark);
# each builder declares its own (``pipelines.builders.Builder.retrieval``).
IMPORTED_RETRIEVAL: dict[str, RetrievalConfig] = {
    "*": RetrievalConfig(),
    # ForecastQA §6.1: top 10, question as the query; its paper retriever is --retrievers
    # bm25_title (App. E.2), tfidf and dense its alternatives (Table 4)
    "forecastqa": RetrievalConfig(k=10),
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
    choice_dates: list[dt.datetime | None] | None = None  # one-by-one: the date kept per choice


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

    def retrieve(
        self,
        item: dict[str, Any],
        retriever: str,
        rc: RetrievalConfig,
        summaries: dict[str, str] | None = None,
    ) -> Context:
        """Top-k eligible documents for an item: published in ``[since, min(t_cut, R))``, never
        a gold article, inside the item's fixed article set when it has one. With ``summaries``
        (article id → summary; ``rc.summaries``) every article is shown as its summary."""
        problem = retriever_problem(retriever, rc)
        if problem:
            raise ValueError(problem)
        cutoff = effective_cutoff(item["t_cut"], rc)
        if retriever in within.SCORED or (summaries is not None and retriever == "dense"):
            return self._within(item, retriever, rc, cutoff, summaries or {})
        search = _Search(self, item, retriever, rc, cutoff)
        return self._context(item, search.top(query_text(item)), rc, cutoff, search.count(), summaries)

    def retrieve_each(self, item: dict[str, Any], retriever: str, rc: RetrievalConfig) -> Context:
        """TCELongBench's One-by-One retrieval for an ordering item: each choice is a query of
        its own, and of its top k documents the earliest-dated is kept. The context holds those
        documents (each once); ``choice_dates`` the kept date per choice (None: none found)."""
        cutoff = effective_cutoff(item["t_cut"], rc)
        search = _Search(self, item, retriever, rc, cutoff)
        kept: dict[str, Hit] = {}
        dates: list[dt.datetime | None] = []
        for choice in item["choices"]:
            earliest = min(search.top(choice), key=lambda h: (h.published_at, h.rank), default=None)
            dates.append(earliest.published_at if earliest else None)
            if earliest is not None:
                kept.setdefault(earliest.doc_id, earliest)
        context = self._context(item, list(kept.values()), rc, cutoff, search.count(), None)
        return dataclasses.replace(context, choice_dates=dates)

    def long_context(self, item: dict[str, Any], words: int, seed: int) -> Context | None:
        """Every eligible article of the item's allowed context, whole, oldest first, trimmed to
        ``words`` by TCELongBench's dropping rules (``udfs.evaluate.long_context``); None when
        the item has no fixed context."""
        ids = list(item.get("context_article_ids") or [])
        if not ids:
            return None
        cutoff = to_utc(item["t_cut"])
        articles = self.articles(ids)
        eligible = within.eligible(item, articles, cutoff)
        evidence = list(item.get("evidence_dates") or [])
        docs = [
            long_context.Doc(
                a, to_utc(articles[a]["published_at"]).date(), len((articles[a]["text"] or "").split())
            )
            for a in eligible
        ]
        kept = long_context.trim(docs, words, long_context.rule_for(item["type"], evidence), evidence, seed)
        hits = [
            Hit(
                doc_id=d.article_id,
                published_at=to_utc(articles[d.article_id]["published_at"]),
                score=0.0,
                rank=n,
            )
            for n, d in enumerate(kept, 1)
        ]
        return self._context(item, hits, None, cutoff, len(eligible), None, articles)

    def _context(
        self,
        item: dict[str, Any],
        hits: list[Hit],
        rc: RetrievalConfig | None,
        cutoff: dt.datetime,
        n_eligible: int,
        summaries: dict[str, str] | None,
        articles: dict[str, dict[str, Any]] | None = None,
    ) -> Context:
        """The checked context of some hits, oldest first (ForecastQA R4, ours); ``rc`` None
        shows whole articles. ``articles``: their rows when already read (by article id)."""
        if articles is None:
            articles = self.articles([h.source_id or h.doc_id for h in hits])
        check_hits(hits, cutoff)
        check_context(item, hits, articles, cutoff)
        hits = sorted(hits, key=lambda h: (h.published_at, h.rank))
        words = rc.doc_words if rc else None
        return Context(
            docs=[_doc(h, articles[h.source_id or h.doc_id], words, summaries) for h in hits],
            ids=[h.doc_id for h in hits],
            dates=[h.published_at for h in hits],
            n_eligible=n_eligible,
        )

    def _within(
        self,
        item: dict[str, Any],
        retriever: str,
        rc: RetrievalConfig,
        cutoff: dt.datetime,
        summaries: dict[str, str],
    ) -> Context:
        """The top k of the item's own article set by its scores (``cil_high`` / ``cil_low``) or
        by the similarity of their summaries to the question (naive RAG), chosen among the
        eligible articles only (``udfs.evaluate.within``)."""
        articles = self.articles(list(item.get("context_article_ids") or []))
        ids = within.eligible(item, articles, cutoff, rc.since)
        if retriever in within.SCORED:
            chosen = within.by_score(item, ids, rc.k, highest=retriever == "cil_high")
        else:
            texts = [summaries.get(a) or first_words(articles[a]["text"] or "", rc.doc_words) for a in ids]
            vectors = self.table().embed([query_text(item), *texts])
            chosen = within.by_similarity(vectors[0], ids, vectors[1:], rc.k)
        hits = [
            Hit(doc_id=a, published_at=to_utc(articles[a]["published_at"]), score=score, rank=rank)
            for rank, (a, score) in enumerate(chosen, 1)
        ]
        return self._context(item, hits, rc, cutoff, len(ids), summaries, articles)

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


class _Search:
    """One item's searches of the index in one setting: its table, bounds and gold exclusions."""

    def __init__(
        self, corpus: Corpus, item: dict[str, Any], retriever: str, rc: RetrievalConfig, cutoff: dt.datetime
    ) -> None:
        self.index = corpus.table(passage_table(rc.chunk_words) if rc.chunk_words else TABLE)
        self.retriever, self.rc, self.cutoff = retriever, rc, cutoff
        self.within = set(item.get("context_article_ids") or []) or None
        self.exclude = set(item.get("gold_article_ids") or [])

    def top(self, query: str) -> list[IndexHit]:
        """The top k for ``query`` (the articles' own rows are read later; a passage brings its
        text)."""
        rc = self.rc
        return self.index.search(
            query,
            self.cutoff,
            rc.k,
            self.retriever,
            rc.since,
            self.exclude,
            self.within,
            strict=rc.strict and self.retriever != "dense",
            text=self.index.passages,
        )

    def count(self) -> int:
        return self.index.count(self.cutoff, self.rc.since, self.exclude, self.within)


def _doc(
    hit: Hit, article: dict[str, Any], words: int | None, summaries: dict[str, str] | None
) -> dict[str, str]:
    """A document as the prompt shows it: a passage shows itself, an article its summary when
    there are summaries (and it has one), else its body; cut to ``words`` (None: whole)."""
    if isinstance(hit, IndexHit) and hit.source_id:
        body = hit.text or ""
    else:
        body = (summaries or {}).get(hit.doc_id) or article["text"] or ""
    return {
        "date": hit.published_at.date().isoformat(),
        "title": article["title"] or "",
        "text": first_words(body, words) if words else body,
    }


def retriever_problem(retriever: str, rc: RetrievalConfig) -> str | None:
    """Why a retriever cannot run with a benchmark's settings (None: it can): ``tfidf`` needs the
    articles' statistics (not a passage table), ``bm25_title`` has no strict form."""
    if retriever not in RETRIEVERS:
        return f"retriever must be one of {RETRIEVERS}"
    if retriever == "tfidf" and rc.chunk_words:
        return "tfidf_needs_whole_articles"
    if retriever == "bm25_title" and rc.strict:
        return "bm25_title_has_no_strict_form"
    return None


def effective_cutoff(t_cut: dt.datetime, rc: RetrievalConfig) -> dt.datetime:
    """``min(t_cut, R)``: the RAG cutoff caps the item's own cutoff."""
    cut = to_utc(t_cut)
    return min(cut, to_utc(rc.rag_cutoff)) if rc.rag_cutoff else cut


def query_text(item: dict[str, Any]) -> str:
    """The search query: the builder's own ``query`` when it wrote one (OpenForecast: the event's
    title and the question's content); else the question (ForecastQA §6.1), ordering items adding
    their choices (TCELongBench's retrieve-once); without a question, the last background lines."""
    if item.get("query"):
        return item["query"]
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
