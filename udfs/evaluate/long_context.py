"""Long-context mode (TCELongBench S10): a forecaster reads every article of its allowed context
(``A_1 .. A_{n-1}``), oldest first; over the word budget, articles are dropped one at a time,
never one published on an evidence (gold) date:

- ``detail`` (an item with evidence dates): from the newest back to the evidence date, then from
  the oldest on;
- ``order`` (an ordering item with its choices' dates g1 ≤ g2 ≤ g3): the newest down to g3, the
  oldest up to g1, then seeded random articles between g1 and g3 that are on none of the dates;
- ``forecast`` (any other item): from the oldest on, keeping what came last.

When only evidence-date articles remain, they are kept even over the budget.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Doc:
    article_id: str
    date: dt.date
    words: int


def rule_for(item_type: str, evidence_dates: Sequence[dt.date]) -> str:
    """Which dropping rule an item follows."""
    if item_type == "ordering" and len(evidence_dates) >= 2:
        return "order"
    return "detail" if evidence_dates else "forecast"


def _drop_order(docs: list[Doc], gold: set[dt.date], rule: str, seed: int) -> list[Doc]:
    """The documents in the order the rule drops them (evidence-date ones never)."""
    free = [d for d in docs if d.date not in gold]
    newest_first = sorted(free, key=lambda d: (d.date, d.article_id), reverse=True)
    oldest_first = newest_first[::-1]
    if rule == "forecast":
        return oldest_first
    first, last = min(gold), max(gold)
    after = [d for d in newest_first if d.date > last]
    before = [d for d in oldest_first if d.date < first]
    middle = [d for d in oldest_first if first < d.date < last]
    if rule == "order":
        random.Random(seed).shuffle(middle)
    return after + before + middle


def trim(
    docs: Sequence[Doc], budget: int, rule: str, evidence_dates: Sequence[dt.date], seed: int
) -> list[Doc]:
    """The documents kept under ``budget`` words, oldest first."""
    kept = sorted(docs, key=lambda d: (d.date, d.article_id))
    total = sum(d.words for d in kept)
    dropped: set[str] = set()
    for doc in _drop_order(kept, set(evidence_dates), rule, seed):
        if total <= budget:
            break
        dropped.add(doc.article_id)
        total -= doc.words
    return [d for d in kept if d.article_id not in dropped]
