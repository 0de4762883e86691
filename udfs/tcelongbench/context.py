"""Temporal integrity of TCELongBench: what a question may see. The context of every question of a
TCE is the articles of days 1..n-1; the last day t_n is the information cutoff (00:00 UTC of t_n),
and nothing dated t_n or later may be in any context."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from udfs.retrieval import LeakageError
from udfs.timeutil import to_utc


def context_articles(
    tce_articles: Sequence[dict[str, Any]], tces: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ``context`` rows: each TCE's articles dated before its last day, with ``cutoff_date`` =
    t_(n-1) (the last day the context covers)."""
    last = {t["tce_id"]: t["dates"][-1] for t in tces}
    cutoff = {t["tce_id"]: t["dates"][-2] for t in tces}
    return [
        {**r, "cutoff_date": cutoff[r["tce_id"]]}
        for r in sorted(tce_articles, key=lambda r: (r["tce_id"], r["date"], r["article_id"]))
        if r["date"] < last[r["tce_id"]]
    ]


def check_items(items: Sequence[dict[str, Any]], article_dates: Mapping[str, dt.date]) -> None:
    """Raise LeakageError when an item's context holds an article dated on or after its cutoff
    (``t_cut``), or one whose date is unknown."""
    for item in items:
        limit = to_utc(item["t_cut"])
        for article_id in item.get("context_article_ids") or []:
            date = article_dates.get(article_id)
            if date is None or to_utc(date) >= limit:
                raise LeakageError(
                    f"{item['item_id']}: context article {article_id} dated {date} is not before {limit:%Y-%m-%d}"
                )
