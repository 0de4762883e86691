"""What the PROPHET steps hand each other: the corpus, the questions, their queries, candidates,
ratings and evidence, the CIL of the evidence, and every question's LLM cost."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipelines.prophet.costs import Costs

if TYPE_CHECKING:
    from pipelines.prophet.cil import CilResult
    from pipelines.prophet.evidence import Corpus


@dataclass
class State:
    """``corpus``: the searchable articles; ``questions`` (a table), ``qrows`` the same by id,
    ``dates`` their resolution dates, ``skipped`` the importer's skip counts; ``queries`` with
    the questions whose queries (``unknown_queries``) or ratings (``unknown_evidence``) a plan
    does not know yet; ``candidates`` and their prompt fields (``articles``); ``rated`` and the
    kept ``evidence``; ``cil``; ``costs`` per question; ``plan``: the ``--plan`` rows."""

    corpus: Corpus | None = None
    questions: pa.Table | None = None
    qrows: dict[str, dict[str, Any]] = field(default_factory=dict)
    dates: dict[str, dt.date] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    queries: list[dict[str, Any]] = field(default_factory=list)
    unknown_queries: set[str] = field(default_factory=set)
    unknown_evidence: set[str] = field(default_factory=set)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    articles: dict[str, dict[str, Any]] = field(default_factory=dict)
    rated: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    cil: CilResult | None = None
    costs: Costs = field(default_factory=Costs)
    plan: list[dict[str, Any]] = field(default_factory=list)
