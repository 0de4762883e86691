"""The spec's §6 worked examples as article sets, for the cost tests and ``bench.cil_cost``.

- ``UNIFORM``: 100 articles over 50 consecutive bins, 2 per bin (about the paper's 16.5-month span);
- ``SURGE``: 30/30/20 articles in bins 0/1/2, then one article in each of bins 3–22.

Articles of bin g are published an hour apart, starting one hour before D − 10·g days; ratings
cycle 2…6, so the K_max cap has ties to break. Texts are seeded pseudo-sentences of a fixed
length (the CIL prompts show short per-article summaries, not whole articles).
"""

from __future__ import annotations

import datetime as dt
import random

from udfs.prophet.cil import EvidenceArticle, cutoff_instant
from udfs.prophet.layout import PromptArticle

UNIFORM = {g: 2 for g in range(50)}
SURGE = {0: 30, 1: 30, 2: 20, **{g: 1 for g in range(3, 23)}}
RESOLUTION_DATE = dt.date(2024, 11, 5)
QUESTION = "Will the incumbent party win the national election held on 2024-11-05?"

_WORDS = (
    "government", "minister", "election", "vote", "party", "court", "police", "city", "council",
    "report", "economy", "market", "price", "rate", "bank", "inflation", "growth", "company",
    "union", "strike", "protest", "talks", "agreement", "deal", "border", "army", "attack",
    "storm", "flood", "officials", "said", "on", "Monday", "Tuesday", "Wednesday", "after",
    "before", "during", "the", "a", "of", "to", "in", "for", "with", "new", "first", "last",
    "year", "week", "month", "people", "country", "state", "leader", "plan",
)  # fmt: skip


def example_articles(
    bin_counts: dict[int, int], resolution_date: dt.date = RESOLUTION_DATE
) -> list[EvidenceArticle]:
    """Articles with ``bin_counts[g]`` of them in bin g (ids ``a<bin>_<n>``)."""
    limit = cutoff_instant(resolution_date)
    return [
        EvidenceArticle(
            f"a{g:03d}_{n:02d}",
            limit - dt.timedelta(days=10 * g, hours=1 + n),
            2 + (g + n) % 5,
        )
        for g, count in sorted(bin_counts.items())
        for n in range(count)
    ]


def example_texts(
    articles: list[EvidenceArticle], words: int = 60, seed: int = 0
) -> dict[str, PromptArticle]:
    """A seeded pseudo-text of ``words`` words per article, as the CIL prompts show it."""
    rng = random.Random(seed)
    return {
        a.article_id: PromptArticle(
            a.published_at.date().isoformat(),
            " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + ".",
        )
        for a in articles
    }
