"""What the Daily Oracle steps hand each other: the run's days, its picked articles and their
questions (each unit carries its own rejection), and the days its outputs mark done."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from udfs.daily_oracle.units import Article, Question


@dataclass
class State:
    """``pending`` days to build now, ``skipped`` (built already); the ``articles`` picked and
    the ``prefiltered`` counts of each day; every ``questions`` of an article with four parsed
    pairs; after the run's outputs, the days ``built`` and those left ``unmarked`` (why)."""

    pending: list[dt.date] = field(default_factory=list)
    skipped: list[dt.date] = field(default_factory=list)
    articles: list[Article] = field(default_factory=list)
    prefiltered: dict[dt.date, dict[str, Any]] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)
    built: list[dt.date] = field(default_factory=list)
    unmarked: dict[dt.date, str] = field(default_factory=dict)
