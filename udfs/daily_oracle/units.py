"""The units of a Daily Oracle build: a picked article and the four questions made from it.

Each unit carries what the steps learnt about it (summary, keypoint, answer, distractors, filter
points, category) and, once dropped, the ``Rejection`` that ended it; a later step only works on
the units still alive. ``check_question`` holds the checks of a fresh question that need no model.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from udfs.daily_oracle.parsing import OTHER, clean_option
from udfs.daily_oracle.questions import (
    TF_EXPECTED,
    TimeElement,
    normalise_yes_no,
    structural_problem,
    time_element,
)
from udfs.daily_oracle.selection import Pick
from udfs.ids import stable_id

NAME = "daily_oracle"
MC_INDEXES = (3, 4)  # questions 3 and 4 are multiple choice, 1 and 2 yes/no


@dataclass(frozen=True)
class Rejection:
    """Why a unit was dropped: the step, a countable reason, the particulars and the model's answer
    at that step. LLM failures have the reason ``<stage>_parse_error``, ``<stage>_engine_error`` or
    ``<stage>_not_run`` (plan mode)."""

    stage: str
    reason: str
    detail: str | None = None
    raw_text: str | None = None

    @property
    def engine_error(self) -> bool:
        return self.reason.endswith("_engine_error")


@dataclass
class Article:
    """A picked article of day ``day`` (``row``: its corpus row) and what the steps made of it."""

    row: dict[str, Any]
    day: dt.date
    pick: Pick
    day_articles: int  # articles of the day that passed the pre-filters
    summary: str | None = None
    keypoint: str | None = None
    rejection: Rejection | None = None
    questions: list[Question] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.row["article_id"]

    def record(self) -> dict[str, Any]:
        """The article's fields kept with a rejected row."""
        return {
            "url": self.row["url"],
            "title": self.row["title"],
            "selection": self.pick.selection,
            "keypoint": self.keypoint,
        }


@dataclass
class Question:
    """Question ``index`` (1..4) of an article."""

    article: Article
    index: int
    question: str
    answer: str
    time: TimeElement | None = None
    distractors: list[str] | None = None
    scores: list[int] | None = None
    filter_raw: str | None = None
    category: str = OTHER
    category_prob: float | None = None
    category_fallback: str | None = None  # why the category fell back to Other
    rejection: Rejection | None = None

    @property
    def id(self) -> str:
        return stable_id(NAME, self.article.id, self.index)

    @property
    def is_mc(self) -> bool:
        return self.index in MC_INDEXES

    @property
    def alive(self) -> bool:
        return self.rejection is None

    def record(self) -> dict[str, Any]:
        """The question's fields (and its article's) kept with a rejected row."""
        return {
            **self.article.record(),
            "question_index": self.index,
            "question": self.question,
            "answer": self.answer,
            "distractors": self.distractors,
            "filter_scores": self.scores,
        }


def check_question(q: Question, raw: str | None) -> Rejection | None:
    """The checks of a fresh question that need no model: Q1 answers Yes and Q2 No (normalised in
    place), an MC answer is cleaned, then the post-filters (``questions.structural_problem``); a
    question that passes gets its time element."""
    if q.index in TF_EXPECTED:
        normalised = normalise_yes_no(q.answer)
        if normalised != TF_EXPECTED[q.index]:
            detail = f"expected {TF_EXPECTED[q.index]}, got {q.answer!r}"
            return Rejection("qa", "tf_answer_mismatch", detail, raw)
        q.answer = normalised
    else:
        q.answer = clean_option(q.answer)
    problem = structural_problem(q.question, q.article.day)
    if problem:
        return Rejection("postfilter", problem[0], problem[1], raw)
    q.time = time_element(q.question)
    return None
