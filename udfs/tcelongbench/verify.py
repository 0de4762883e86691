"""S8 — the voted checks: the ``Q1: <L>. Q2: <L>`` parser, the per-round rule of each check and
the vote over rounds. A = pass, B = fail, C = unknown (counts as fail); an unparseable round fails."""

from __future__ import annotations

import re
from collections.abc import Sequence

from udfs.llm_parsing import ParseError

FORECASTING = "forecasting"
STORY_TEMPORAL = "story_temporal"
# The (Q1, Q2) answer a round needs to pass. Forecasting's Q2 asks whether pre-Day articles settle
# the answer, so a forecastable question needs Q2 = B (spec §7).
PASSING = {FORECASTING: ("A", "B"), STORY_TEMPORAL: ("A", "A")}

_ANSWER = re.compile(r"Q([12])\s*[:.)\-]?\s*\(?\s*([A-Ca-c])\b")


def parse_votes(text: str) -> dict[str, str]:
    """``Q1: A. Q2: B`` → ``{"q1": "A", "q2": "B"}``: the first answer given to each question (a
    letter A–C, optionally in parentheses). A question left unanswered is a parse error."""
    found: dict[str, str] = {}
    for q, letter in _ANSWER.findall(text or ""):
        found.setdefault(f"q{q}", letter.upper())
    missing = [q for q in ("q1", "q2") if q not in found]
    if missing:
        raise ParseError(f"no answer to {', '.join(m.upper() for m in missing)}")
    return found


def round_passes(check: str, q1: str | None, q2: str | None) -> bool:
    """Whether one round's answers pass the check (None = unparseable round = fail)."""
    return (q1, q2) == PASSING[check]


def vote(passes: Sequence[bool], min_pass: int) -> bool:
    """The item passes when at least ``min_pass`` rounds passed."""
    return sum(bool(p) for p in passes) >= min_pass
