"""TCELongBench S10's retriever measures and its date-only ordering baseline.

Per item, from what a retrieval setting showed and where the answer lies inside the allowed
context (``evidence_article_ids`` / ``evidence_dates`` of the item):

- ``hit_doc``: at least one shown document comes from an evidence article (Acc_Doc);
- ``hit_date``: at least one is dated on an evidence date (Acc_Date);
- ``hit_dates`` (items with several evidence dates: order problems): the set of shown dates
  equals the set of evidence dates (Acc_Dates).

Each is None when the item names no such evidence. ``order_by_dates`` is the Acc_by_Date
baseline: the choices ordered by the dates of their one-by-one chunks, no model involved.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from udfs.index_docs import article_of
from udfs.timeutil import to_utc


def hits(item: dict[str, Any], ids: Sequence[str], dates: Sequence[dt.datetime]) -> dict[str, bool | None]:
    """The three retriever measures of one item's shown documents."""
    articles = set(item.get("evidence_article_ids") or [])
    days = set(item.get("evidence_dates") or [])
    shown = {to_utc(d).date() for d in dates}
    return {
        "hit_doc": bool(articles & {article_of(i) for i in ids}) if articles else None,
        "hit_date": bool(days & shown) if days else None,
        "hit_dates": shown == days if len(days) > 1 else None,
    }


def order_by_dates(dates: Sequence[dt.datetime | None]) -> list[int]:
    """Choice indexes earliest first by their chunks' dates; a choice without a chunk goes last,
    ties keep the presented order."""
    last = dt.datetime.max.replace(tzinfo=dt.UTC)
    return sorted(range(len(dates)), key=lambda i: (to_utc(dates[i]) if dates[i] else last, i))
