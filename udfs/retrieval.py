"""Time-constrained retrieval: BM25, dense and hybrid search with the cutoff applied inside the search.

An index is built once over every dated document, sorted by publication time. A search with
cutoff ``t`` (and an optional lower bound ``since``) scores only the documents published in
``[since, t)`` — a contiguous slice of the sorted index — so it returns a full top-k of eligible
documents whenever k of them exist, never a post-filtered top-k, and the same index serves every
cutoff. ``exclude`` (a question's gold articles) and ``within`` (a fixed set of allowed articles)
act on the same eligibility mask before ranking. Every returned hit is checked against the
cutoff before it leaves this module (``LeakageError`` aborts the run).

Documents may be chunks of articles: each document then names its source article
(``sources``), and ``exclude`` / ``within`` match source ids, so a gold article's chunks never
come back.

BM25 term statistics (IDF, average length) come from the whole index in the default mode, a
documented mild leak of corpus statistics (not of content). ``strict=True`` builds, per distinct
eligible window, an index over the eligible documents only (cached), which is what Daily Oracle's
parity mode requires. Dense scores have no corpus statistics, so they need no strict mode.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from udfs.timeutil import to_utc

DAILY_ORACLE_START = dt.date(2019, 1, 1)


class LeakageError(AssertionError):
    """A retrieved document was published on or after the question's cutoff."""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    published_at: dt.datetime
    score: float
    rank: int
    source_id: str = ""  # the article a chunk comes from ("" when documents are whole articles)


def check_hits(hits: Sequence[Hit], cutoff: dt.datetime | dt.date) -> None:
    """Raise LeakageError when any hit is not strictly before the cutoff."""
    limit = to_utc(cutoff)
    late = [h for h in hits if to_utc(h.published_at) >= limit]
    if late:
        raise LeakageError(
            f"{len(late)} retrieved documents at or after cutoff {limit.isoformat()}: {late[:3]}"
        )


def daily_oracle_window(
    d_res: dt.date, rag_cutoff: dt.date | None = None, start: dt.date = DAILY_ORACLE_START
) -> tuple[dt.date, dt.date]:
    """Daily Oracle's accessible window ``[start, min(d_res − 1 day, R))`` as (since, until):
    documents dated d_res − 1 and R are outside it, d_res − 2 is inside."""
    until = d_res - dt.timedelta(days=1)
    if rag_cutoff is not None:
        until = min(until, rag_cutoff)
    return start, until


def first_words(text: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``text``."""
    return " ".join((text or "").split()[:n])


def chunk_words(text: str, size: int) -> list[str]:
    """Consecutive chunks of at most ``size`` words (an empty text gives no chunk)."""
    if size < 1:
        raise ValueError("chunk size must be positive")
    words = (text or "").split()
    return [" ".join(words[i : i + size]) for i in range(0, len(words), size)]


def chunk_documents(
    doc_ids: Sequence[str],
    published_at: Sequence[dt.datetime | dt.date | None],
    texts: Sequence[str],
    size: int,
) -> tuple[list[str], list[dt.datetime | dt.date | None], list[str], list[str]]:
    """Split documents into word chunks: (chunk ids ``<doc>#<n>``, dates, texts, source ids)."""
    ids, dates, chunks, sources = [], [], [], []
    for doc_id, stamp, text in zip(doc_ids, published_at, texts, strict=True):
        for n, chunk in enumerate(chunk_words(text, size)):
            ids.append(f"{doc_id}#{n}")
            dates.append(stamp)
            chunks.append(chunk)
            sources.append(doc_id)
    return ids, dates, chunks, sources


class _SortedCorpus:
    """Documents sorted by publication time (undated documents are refused at build time)."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date],
        texts: Sequence[str],
        sources: Sequence[str] | None = None,
    ):
        if not (len(doc_ids) == len(published_at) == len(texts)):
            raise ValueError("doc_ids, published_at and texts must have the same length")
        if sources is not None and len(sources) != len(doc_ids):
            raise ValueError("sources must have one entry per document")
        if any(p is None for p in published_at):
            raise ValueError("undated documents cannot be indexed for time-constrained retrieval")
        stamps = [to_utc(p) for p in published_at]
        order = sorted(range(len(doc_ids)), key=lambda i: (stamps[i], doc_ids[i]))
        self.doc_ids = [doc_ids[i] for i in order]
        self.published_at = [stamps[i] for i in order]
        self.texts = [texts[i] for i in order]
        self.sources = [sources[i] for i in order] if sources is not None else list(self.doc_ids)
        self.chunked = sources is not None
        self._epoch = np.array([p.timestamp() for p in self.published_at], dtype=np.float64)
        self._source_array = np.array(self.sources, dtype=object)
        self._position = {doc_id: i for i, doc_id in enumerate(self.doc_ids)}

    def __len__(self) -> int:
        return len(self.doc_ids)

    def text(self, doc_id: str) -> str:
        """The indexed text of a document."""
        return self.texts[self._position[doc_id]]

    def _index_of(self, when: dt.datetime | dt.date) -> int:
        return int(np.searchsorted(self._epoch, to_utc(when).timestamp(), side="left"))

    def window(self, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None = None) -> range:
        """Index positions of the documents published in ``[since, cutoff)``."""
        hi = self._index_of(cutoff)
        lo = min(self._index_of(since), hi) if since is not None else 0
        return range(lo, hi)

    def n_eligible(self, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None = None) -> int:
        """How many documents were published in ``[since, cutoff)``."""
        return len(self.window(cutoff, since))

    def mask(
        self,
        cutoff: dt.datetime | dt.date,
        since: dt.datetime | dt.date | None = None,
        exclude: Collection[str] = (),
        within: Collection[str] | None = None,
    ) -> np.ndarray:
        """Boolean eligibility of every document: in the window, its source not excluded, and
        its source inside ``within`` when that is given."""
        keep = np.zeros(len(self), dtype=bool)
        span = self.window(cutoff, since)
        keep[span.start : span.stop] = True
        if exclude:
            keep &= ~np.isin(self._source_array, list(exclude))
        if within is not None:
            keep &= np.isin(self._source_array, list(within))
        return keep

    def top_k(self, scores: np.ndarray, k: int, mask: np.ndarray, cutoff: dt.datetime | dt.date) -> list[Hit]:
        """The k best eligible documents with a finite score (ties: earlier index)."""
        eligible = np.where(mask, scores.astype(np.float64, copy=False), -np.inf)
        candidates = np.flatnonzero(np.isfinite(eligible))
        order = candidates[np.lexsort((candidates, -eligible[candidates]))][:k]
        hits = [
            Hit(
                self.doc_ids[i],
                self.published_at[i],
                float(eligible[i]),
                r,
                self.sources[i] if self.chunked else "",
            )
            for r, i in enumerate(order)
        ]
        check_hits(hits, cutoff)
        return hits


class _CutoffSearch(ABC):
    """``search(query, cutoff, k)`` over ``self.corpus``: the eligibility mask (cutoff, since,
    exclude, within) goes inside the ranking, so a full top-k of eligible documents comes back.
    Subclasses give the ranking scores (−inf: never returned)."""

    corpus: _SortedCorpus

    @abstractmethod
    def ranking(
        self, query: str, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None, mask: np.ndarray
    ) -> np.ndarray: ...

    def search(
        self,
        query: str,
        cutoff: dt.datetime | dt.date,
        k: int,
        exclude: Collection[str] = (),
        since: dt.datetime | dt.date | None = None,
        within: Collection[str] | None = None,
    ) -> list[Hit]:
        mask = self.corpus.mask(cutoff, since, exclude, within)
        return self.corpus.top_k(self.ranking(query, cutoff, since, mask), k, mask, cutoff)


class BM25Index(_CutoffSearch):
    """BM25 (bm25s) over a dated corpus; ``search(query, cutoff, k)``. Documents with no query
    term (score 0) are never returned."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date],
        texts: Sequence[str],
        strict: bool = False,
        k1: float = 1.5,
        b: float = 0.75,
        sources: Sequence[str] | None = None,
    ):
        self.corpus = _SortedCorpus(doc_ids, published_at, texts, sources)
        self.strict, self.k1, self.b = strict, k1, b
        self._full = self._build(self.corpus.texts) if not strict else None
        self._snapshots: dict[tuple[int, int], object] = {}

    def _build(self, texts: Sequence[str]):
        import bm25s

        retriever = bm25s.BM25(k1=self.k1, b=self.b)
        if texts:
            retriever.index(
                bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False
            )
        return retriever

    def scores(
        self, query: str, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None = None
    ) -> np.ndarray:
        """BM25 scores of every document in index order; only the eligible window is meaningful
        (in strict mode the rest is zero)."""
        import bm25s

        full = np.zeros(len(self.corpus))
        span = self.corpus.window(cutoff, since)
        if self.strict:
            key = (span.start, span.stop)
            if key not in self._snapshots:
                self._snapshots[key] = self._build(self.corpus.texts[span.start : span.stop])
            retriever, offset, size = self._snapshots[key], span.start, len(span)
        else:
            retriever, offset, size = self._full, 0, len(self.corpus)
        if size == 0:
            return full
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        vocab = retriever.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if ids:
            full[offset : offset + size] = np.asarray(retriever.get_scores(ids), dtype=np.float64)
        return full

    def ranking(
        self, query: str, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None, mask: np.ndarray
    ) -> np.ndarray:
        scores = self.scores(query, cutoff, since)
        return np.where(scores > 0, scores, -np.inf)


class DenseIndex(_CutoffSearch):
    """Cosine search over sentence embeddings (default: the bundled MiniLM)."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date],
        texts: Sequence[str],
        encoder: str | None = None,
        sources: Sequence[str] | None = None,
    ):
        from udfs.embeddings import DEFAULT_ENCODER, embed

        self.corpus = _SortedCorpus(doc_ids, published_at, texts, sources)
        self.encoder = encoder or DEFAULT_ENCODER
        self.vectors = embed(self.corpus.texts, self.encoder)

    def scores(self, query: str) -> np.ndarray:
        from udfs.embeddings import embed

        return self.vectors @ embed([query], self.encoder)[0]

    def ranking(
        self, query: str, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None, mask: np.ndarray
    ) -> np.ndarray:
        return self.scores(query)


def rank_positions(scores: np.ndarray, mask: np.ndarray, depth: int | None) -> np.ndarray:
    """1-based rank of each eligible document with a finite score (ties: earlier index), 0 for
    the others and for ranks deeper than ``depth``."""
    eligible = np.where(mask, scores.astype(np.float64, copy=False), -np.inf)
    candidates = np.flatnonzero(np.isfinite(eligible))
    order = candidates[np.lexsort((candidates, -eligible[candidates]))]
    if depth is not None:
        order = order[:depth]
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def reciprocal_rank_fusion(rank_lists: Sequence[np.ndarray], rrf_k: int = 60) -> np.ndarray:
    """Fused scores ``Σ 1/(rrf_k + rank)`` over the lists where a document is ranked; −inf where
    it is ranked in none."""
    fused = np.zeros(len(rank_lists[0]))
    ranked = np.zeros(len(rank_lists[0]), dtype=bool)
    for ranks in rank_lists:
        present = ranks > 0
        fused[present] += 1.0 / (rrf_k + ranks[present])
        ranked |= present
    return np.where(ranked, fused, -np.inf)


class HybridIndex(_CutoffSearch):
    """BM25 ∪ dense, fused by reciprocal rank fusion over each retriever's top ``depth`` eligible
    documents (TCELongBench's hybrid retriever, with RRF as the re-ranker). Both rankings see
    the same eligibility mask, so the cutoff is inside the search of each."""

    def __init__(self, bm25: BM25Index, dense: DenseIndex, rrf_k: int = 60, depth: int | None = 100):
        if bm25.corpus.doc_ids != dense.corpus.doc_ids:
            raise ValueError("the BM25 and dense indexes must cover the same documents")
        self.bm25, self.dense, self.rrf_k, self.depth = bm25, dense, rrf_k, depth
        self.corpus = bm25.corpus

    def ranking(
        self, query: str, cutoff: dt.datetime | dt.date, since: dt.datetime | dt.date | None, mask: np.ndarray
    ) -> np.ndarray:
        return reciprocal_rank_fusion(
            [
                rank_positions(self.bm25.ranking(query, cutoff, since, mask), mask, self.depth),
                rank_positions(self.dense.ranking(query, cutoff, since, mask), mask, self.depth),
            ],
            self.rrf_k,
        )


class EvidenceIndex:
    """Dense search for a judge's evidence (OpenForecast's LRAE stage 2): documents dated inside
    an inclusive ``[start, end]`` window, undated ones always kept. Not for forecasters — the
    window lies after the forecast's cutoff on purpose."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date | None],
        texts: Sequence[str],
        encoder: str | None = None,
    ):
        from udfs.embeddings import DEFAULT_ENCODER, embed

        self.doc_ids, self.texts = list(doc_ids), list(texts)
        self.encoder = encoder or DEFAULT_ENCODER
        self._epoch = np.array(
            [np.nan if p is None else to_utc(p).timestamp() for p in published_at], dtype=np.float64
        )
        self.vectors = embed(self.texts, self.encoder)

    def search_vectors(
        self,
        queries: np.ndarray,
        start: dt.datetime | dt.date | None,
        end: dt.datetime | dt.date | None,
        k: int,
    ) -> list[list[int]]:
        """For each (normalised) query vector, the positions of its k most similar documents in
        the window (ties: earlier position)."""
        keep = np.ones(len(self.doc_ids), dtype=bool)
        dated = ~np.isnan(self._epoch)
        if start is not None:
            keep &= ~dated | (self._epoch >= to_utc(start).timestamp())
        if end is not None:
            keep &= ~dated | (self._epoch <= to_utc(end).timestamp())
        result = []
        for query in queries:
            scores = np.where(keep, self.vectors @ query, -np.inf)
            candidates = np.flatnonzero(np.isfinite(scores))
            result.append(candidates[np.lexsort((candidates, -scores[candidates]))][:k].tolist())
        return result
