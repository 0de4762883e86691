"""DrQA's TF-IDF score (Chen et al., 2017), a pure function of term counts and statistics.

DrQA weights a term ``log(1 + tf) · idf`` with ``idf = max(0, log((N − df + 0.5) / (df + 0.5)))``
in the query and in the document alike, and ranks documents by the sparse dot product of the two
vectors (documents are not length-normalised; the query's norm would not change a ranking). Only
the query's terms enter the product, so a document's score needs the document frequencies of
those terms alone. DrQA hashes unigrams and bigrams into 2^24 buckets; here terms are the
unigrams of ``udfs.index_docs.terms``, unhashed (the index's statistics count unigrams).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping


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
