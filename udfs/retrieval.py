"""What every retrieval path shares: the hit record, the leak check every hit passes before it
leaves a search, and Daily Oracle's window start.

The searches themselves live in the article index (``pipelines.index``): the cutoff is a
prefilter inside the engine query, and every hit is checked here against it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from udfs.timeutil import to_utc

DAILY_ORACLE_START = dt.date(2019, 1, 1)  # Daily Oracle §5: retrieval reads from 2019-01-01 on


class LeakageError(AssertionError):
    """A retrieved document was published on or after the question's cutoff."""


@dataclass(frozen=True)
class Hit:
    doc_id: str
    published_at: dt.datetime
    score: float
    rank: int
    source_id: str = ""  # the article a passage comes from ("" when documents are whole articles)


def check_hits(hits: Sequence[Hit], cutoff: dt.datetime | dt.date) -> None:
    """Raise LeakageError when any hit is not strictly before the cutoff."""
    limit = to_utc(cutoff)
    late = [h for h in hits if to_utc(h.published_at) >= limit]
    if late:
        raise LeakageError(
            f"{len(late)} retrieved documents at or after cutoff {limit.isoformat()}: {late[:3]}"
        )
