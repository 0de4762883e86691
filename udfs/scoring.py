"""The scores the article index computes itself: BM25 and DrQA's TF-IDF over a pool of documents
under given statistics, and reciprocal-rank fusion. Pure functions of texts, term counts and
statistics; the engine (``pipelines.index.engine``) fetches the pools and the window statistics.

**BM25** (strict statistics): k1 1.2, b 0.75 and Lucene's IDF, ``log(1 + (N − df + 0.5)/(df + 0.5))``,
never negative; a query term counts once however often the query repeats it.

**TF-IDF** (ForecastQA's DrQA retriever, Chen et al., 2017): a term weighs ``log(1 + tf) · idf``
with ``idf = max(0, log((N − df + 0.5)/(df + 0.5)))`` in the query and in the document alike, and
a document scores the sparse dot product of the two vectors (no length normalisation; the
query's norm would change no ranking). Only the query's terms enter the product, so a score
needs the document frequencies of those terms alone. DrQA hashes unigrams and bigrams into 2^24
buckets; here terms are the unigrams of ``udfs.index_docs.terms``, unhashed (the index's
statistics count unigrams).

**RRF** (Cormack et al., 2009): a document scores ``Σ 1/(RRF_K + rank)`` over the ranked lists it
appears in, ranks counted from 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from udfs.index_docs import terms

K1, B = 1.2, 0.75
RRF_K = 60


def bm25(tf: int, dl: int, df: int, n: int, avgdl: float) -> float:
    """One term's BM25 contribution to a document of ``dl`` terms holding it ``tf`` times."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


def bm25_scores(query: str, texts: Iterable[str], df: Mapping[str, int], n: int, tokens: int) -> list[float]:
    """BM25 of each text for ``query`` among ``n`` documents of ``tokens`` terms in all, ``df``
    the document frequency of each query term (a term with none adds nothing)."""
    wanted = sorted(set(terms(query)))
    out = []
    for text in texts:
        counts = Counter(terms(text))
        dl = sum(counts.values())
        out.append(sum(bm25(counts[t], dl, df[t], n, tokens / n) for t in wanted if counts[t] and df.get(t)))
    return out


def idf(df: int, n: int) -> float:
    """DrQA's inverse document frequency: 0 for a term in half the documents or more."""
    return max(0.0, math.log((n - df + 0.5) / (df + 0.5)))


def tfidf_score(query: Counter, doc: Counter, df: Mapping[str, int], n: int) -> float:
    """The dot product of the query's and the document's TF-IDF vectors (term counts given)."""
    return sum(
        math.log1p(count) * math.log1p(doc[term]) * idf(df[term], n) ** 2
        for term, count in query.items()
        if doc[term] and df.get(term)
    )


def tfidf_scores(query: str, texts: Iterable[str], df: Mapping[str, int], n: int) -> list[float]:
    """DrQA's TF-IDF of each text for ``query`` among ``n`` documents."""
    wanted = Counter(terms(query))
    return [tfidf_score(wanted, Counter(terms(text)), df, n) for text in texts]


def rrf(ranked: Sequence[Sequence[str]]) -> dict[str, float]:
    """Reciprocal-rank fusion of ranked lists of document ids: id → fused score."""
    fused: dict[str, float] = {}
    for ids in ranked:
        for rank, doc in enumerate(ids, 1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return fused
