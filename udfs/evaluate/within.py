"""Choosing documents inside an item's fixed article set (PROPHET §5), without the index:

- ``cil_high`` / ``cil_low``: the k articles with the highest / lowest score the builder gave them
  (``context_scores``: PROPHET's CIL). These select with the outcome in hand, so they are bounds
  on what a retriever could do, not forecasts;
- naive RAG: the k articles whose summaries are most similar to the question (cosine of
  normalised embeddings).

The candidates are filtered by date first — dated, published in ``[since, cutoff)``, not a gold
article — so a full k of eligible articles is chosen whenever k exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np

from udfs.timeutil import to_utc

SCORED = ("cil_high", "cil_low")


def eligible(
    item: dict[str, Any],
    articles: dict[str, dict[str, Any]],
    cutoff: dt.datetime,
    since: dt.date | None = None,
) -> list[str]:
    """The item's context articles a forecaster may see, in the item's order."""
    gold = set(item.get("gold_article_ids") or [])
    start = to_utc(since) if since else None
    out = []
    for article_id in item.get("context_article_ids") or []:
        published = (articles.get(article_id) or {}).get("published_at")
        if published is None or article_id in gold or to_utc(published) >= cutoff:
            continue
        if start is None or to_utc(published) >= start:
            out.append(article_id)
    return out


def by_score(item: dict[str, Any], ids: Sequence[str], k: int, highest: bool) -> list[tuple[str, float]]:
    """The ``k`` of ``ids`` with the highest (lowest) score, ties by id; unscored ones never."""
    scores = dict(zip(item.get("context_article_ids") or [], item.get("context_scores") or [], strict=False))
    scored = [(a, scores[a]) for a in ids if scores.get(a) is not None]
    scored.sort(key=lambda pair: (-pair[1] if highest else pair[1], pair[0]))
    return scored[:k]


def by_similarity(
    query: np.ndarray, ids: Sequence[str], vectors: np.ndarray, k: int
) -> list[tuple[str, float]]:
    """The ``k`` of ``ids`` whose (normalised) vectors have the highest cosine with ``query``,
    ties by position."""
    if not len(ids):
        return []
    sims = vectors @ query
    order = sorted(range(len(ids)), key=lambda i: (-float(sims[i]), i))
    return [(ids[i], float(sims[i])) for i in order[:k]]
