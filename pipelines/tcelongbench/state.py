"""What the TCELongBench steps hand each other, S1 to S8."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipelines.tcelongbench.formation import Events


@dataclass
class State:
    """``events``: the TCEs, their article rows and articles (S1); ``summarised``: the article
    summaries (S2); ``days``: one summary per TCE day (S3); ``raw_points`` (S4) and
    ``key_points`` with their status (S5), ``kept`` the kept ones with their gold articles;
    ``questions``: the detail and forecast questions through their checks (S6);
    ``mc_questions``: those kept, forecasts after their vote (S8); ``problems`` and
    ``order_questions``: the order windows and those kept (S7)."""

    events: Events = field(default_factory=lambda: Events([], [], {}, 0))
    summarised: list[dict[str, Any]] = field(default_factory=list)
    days: list[dict[str, Any]] = field(default_factory=list)
    raw_points: list[dict[str, Any]] = field(default_factory=list)
    key_points: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
    mc_questions: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    order_questions: list[dict[str, Any]] = field(default_factory=list)
