"""Time-constrained retrieval: BM25 and dense search with the cutoff applied inside the search.

An index is built once over every dated document, sorted by publication time. A search with
cutoff ``t`` scores only the documents published strictly before ``t`` (a prefix of the sorted
index), so it returns a full top-k of eligible documents whenever k of them exist — never a
post-filtered top-k — and the same index serves every cutoff. Every returned hit is checked
against the cutoff before it leaves this module (``LeakageError`` aborts the run).

BM25 term statistics (IDF, average length) come from the whole index in the default mode, a
documented mild leak of corpus statistics (not of content). ``strict=True`` builds, per distinct
cutoff, an index over the eligible documents only (cached), which is what Daily Oracle's parity
mode requires.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from udfs.timeutil import to_utc


class LeakageError(AssertionError):
    """A retrieved document was published on or after the question's cutoff."""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    published_at: dt.datetime
    score: float
    rank: int


def check_hits(hits: Sequence[Hit], cutoff: dt.datetime | dt.date) -> None:
    """Raise LeakageError when any hit is not strictly before the cutoff."""
    limit = to_utc(cutoff)
    late = [h for h in hits if to_utc(h.published_at) >= limit]
    if late:
        raise LeakageError(
            f"{len(late)} retrieved documents at or after cutoff {limit.isoformat()}: {late[:3]}"
        )


class _SortedCorpus:
    """Documents sorted by publication time (undated documents are refused at build time)."""

    def __init__(
        self, doc_ids: Sequence[str], published_at: Sequence[dt.datetime | dt.date], texts: Sequence[str]
    ):
        if not (len(doc_ids) == len(published_at) == len(texts)):
            raise ValueError("doc_ids, published_at and texts must have the same length")
        if any(p is None for p in published_at):
            raise ValueError("undated documents cannot be indexed for time-constrained retrieval")
        stamps = [to_utc(p) for p in published_at]
        order = sorted(range(len(doc_ids)), key=lambda i: (stamps[i], doc_ids[i]))
        self.doc_ids = [doc_ids[i] for i in order]
        self.published_at = [stamps[i] for i in order]
        self.texts = [texts[i] for i in order]
        self._epoch = np.array([p.timestamp() for p in self.published_at], dtype=np.float64)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def n_eligible(self, cutoff: dt.datetime | dt.date) -> int:
        """How many documents were published strictly before the cutoff."""
        return int(np.searchsorted(self._epoch, to_utc(cutoff).timestamp(), side="left"))

    def top_k(self, scores: np.ndarray, k: int, cutoff, exclude: set[str]) -> list[Hit]:
        """The k best of the eligible prefix (ties: earlier index), skipping excluded ids."""
        n = self.n_eligible(cutoff)
        eligible = scores[:n].astype(np.float64, copy=True)
        for i, doc_id in enumerate(self.doc_ids[:n]):
            if doc_id in exclude:
                eligible[i] = -np.inf
        candidates = np.flatnonzero(np.isfinite(eligible))
        order = candidates[np.lexsort((candidates, -eligible[candidates]))][:k]
        hits = [
            Hit(self.doc_ids[i], self.published_at[i], float(eligible[i]), r) for r, i in enumerate(order)
        ]
        check_hits(hits, cutoff)
        return hits


class BM25Index:
    """BM25 (bm25s) over a dated corpus; ``search(query, cutoff, k)``."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date],
        texts: Sequence[str],
        strict: bool = False,
        k1: float = 1.5,
        b: float = 0.75,
    ):
        self.corpus = _SortedCorpus(doc_ids, published_at, texts)
        self.strict, self.k1, self.b = strict, k1, b
        self._full = self._build(self.corpus.texts) if not strict else None
        self._snapshots: dict[int, object] = {}

    def _build(self, texts: Sequence[str]):
        import bm25s

        retriever = bm25s.BM25(k1=self.k1, b=self.b)
        if texts:
            retriever.index(
                bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False
            )
        return retriever

    def scores(self, query: str, cutoff: dt.datetime | dt.date) -> np.ndarray:
        """BM25 scores of the documents (in index order); only the eligible prefix is meaningful."""
        import bm25s

        n = self.corpus.n_eligible(cutoff)
        if self.strict:
            if n not in self._snapshots:
                self._snapshots[n] = self._build(self.corpus.texts[:n])
            retriever, size = self._snapshots[n], n
        else:
            retriever, size = self._full, len(self.corpus)
        if size == 0:
            return np.zeros(0)
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        vocab = retriever.vocab_dict
        ids = [vocab[t] for t in tokens if t in vocab]
        if not ids:
            return np.zeros(size)
        return np.asarray(retriever.get_scores(ids), dtype=np.float64)

    def search(
        self, query: str, cutoff: dt.datetime | dt.date, k: int, exclude: Sequence[str] = ()
    ) -> list[Hit]:
        scores = self.scores(query, cutoff)
        positive = np.where(scores > 0, scores, -np.inf)
        return self.corpus.top_k(positive, k, cutoff, set(exclude))


class DenseIndex:
    """Cosine search over sentence embeddings (default: the bundled MiniLM)."""

    def __init__(
        self,
        doc_ids: Sequence[str],
        published_at: Sequence[dt.datetime | dt.date],
        texts: Sequence[str],
        encoder: str | None = None,
    ):
        from udfs.embeddings import DEFAULT_ENCODER, embed

        self.corpus = _SortedCorpus(doc_ids, published_at, texts)
        self.encoder = encoder or DEFAULT_ENCODER
        self.vectors = embed(self.corpus.texts, self.encoder)

    def scores(self, query: str) -> np.ndarray:
        from udfs.embeddings import embed

        return self.vectors @ embed([query], self.encoder)[0]

    def search(
        self, query: str, cutoff: dt.datetime | dt.date, k: int, exclude: Sequence[str] = ()
    ) -> list[Hit]:
        return self.corpus.top_k(self.scores(query), k, cutoff, set(exclude))
