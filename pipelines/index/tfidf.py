"""TF-IDF search (ForecastQA's DrQA-style retriever) on the article index.

LanceDB scores full text with BM25 only. A ``tfidf`` search therefore

1. asks the engine for a pool: the full-text (BM25) top ``pool_size(k)`` eligible articles, with
   the cutoff and every other bound a prefilter inside the engine query, as strict BM25 does;
2. takes the document frequencies of the query's terms and the number of documents from the
   window's per-day statistics (``StrictStatistics.window``: the articles of ``[since, cutoff)``);
3. scores each pool article with DrQA's TF-IDF (``udfs.tfidf``) and keeps the k best (ties:
   article id); an article with no query term scores 0 and is left out.

The approximation: scores are exact TF-IDF for the pool's articles, but an article outside the
engine's BM25 top ``pool_size(k)`` cannot come back. The statistics are the window's (no
article at or after the cutoff counts), so ``tfidf`` is leak-free by construction with or
without ``strict``. The process holds the pool, never the corpus.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import TYPE_CHECKING, Any

from pipelines.index.strict import pool_size
from udfs.index_docs import terms
from udfs.tfidf import tfidf_score

if TYPE_CHECKING:
    from pipelines.index.engine import ArticleIndex
    from pipelines.index.strict import StrictStatistics


def rank(
    index: ArticleIndex,
    statistics: StrictStatistics,
    query: str,
    cutoff: dt.date | dt.datetime,
    since: dt.date | dt.datetime | None,
    where: str,
    k: int,
    text: bool,
) -> list[dict[str, Any]]:
    """The k best eligible articles by TF-IDF, as engine rows with ``_strict_score``."""
    wanted = Counter(terms(query))
    pool = index.query(query, "bm25", text=True).where(where, prefilter=True).limit(pool_size(k)).to_list()
    n, _, df = statistics.window(index, cutoff, since, sorted(wanted))
    scored = []
    for row in pool:
        score = tfidf_score(wanted, Counter(terms(row["text"])), df, n)
        if score > 0:
            scored.append({**row, "_strict_score": score} if text else _bare(row, score))
    scored.sort(key=lambda r: (-r["_strict_score"], r["article_id"]))
    return scored[:k]


def _bare(row: dict[str, Any], score: float) -> dict[str, Any]:
    """A hit row without host, title or text (for callers that want ids)."""
    return {"article_id": row["article_id"], "published_at": row["published_at"], "_strict_score": score}
