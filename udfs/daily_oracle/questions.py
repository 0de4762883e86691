"""Per-question rules of Daily Oracle: answer normalisation, the explicit time element, the
post-filters, the distractor checks, the 7-principle keep rule and the seeded option shuffle.

Each check returns ``None`` when the question passes or a short reason code (the ``reason`` of
its rejected row) with a detail; nothing here raises on model output.
"""

from __future__ import annotations

import calendar
import datetime as dt
import random
import re
from dataclasses import dataclass

from udfs.daily_oracle.parsing import clean_option
from udfs.ids import stable_seed

KEEP_MIN_TOTAL = 13  # of 14: no 0 anywhere and at most one 1 (spec §4.4; the code uses >= 13)
LETTERS = ("a", "b", "c", "d")
TF_EXPECTED = {1: "Yes", 2: "No"}  # question index -> required answer

_QUOTES = "\"'“”‘’"
_LEAK_WORDS = re.compile(r"(?i)\baccording\b|\barticle\b")


def clean_question(question: str) -> str:
    """Strip whitespace and leading/trailing quotes (the prompt shows questions in quotes)."""
    return question.strip().strip(_QUOTES).strip()


def normalise_yes_no(answer: str) -> str | None:
    """``Yes``/``No`` from an answer like ``"Yes."``; None when it is anything else."""
    word = re.sub(r"[^\w]+", " ", answer).strip().lower()
    return {"yes": "Yes", "no": "No"}.get(word)


_MC_STEM = re.compile(r"(?i)^\s*(what|who|where|when|which|how\s+much|how\s+many)\b")


def mc_stem(question: str) -> str:
    """The leading wh-phrase of a MC question: ``what``, ``who``, ``which``, ``how much``, …, or
    ``other``."""
    m = _MC_STEM.match(question)
    return " ".join(m.group(1).lower().split()) if m else "other"


# ------------------------------------------------------------------ time elements
_MONTHS = {
    name: k
    for k, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_SEASON_END = {"spring": (5, 0), "summer": (8, 0), "fall": (11, 0), "autumn": (11, 0), "winter": (2, 1)}
_QUARTER = {"q1": 3, "q2": 6, "q3": 9, "q4": 12, "first": 3, "second": 6, "third": 9, "fourth": 12}
_PATTERNS = [
    ("iso", re.compile(r"\b" + _YEAR + r"-(?P<mnum>\d{2})-(?P<day>\d{2})\b")),
    ("month_day_year", re.compile(r"(?i)\b" + _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR + r"\b")),
    ("day_month_year", re.compile(r"(?i)\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b")),
    ("month_year", re.compile(r"(?i)\b" + _MONTH + r",?\s+(?:of\s+)?" + _YEAR + r"\b")),
    (
        "season",
        re.compile(r"(?i)\b(?P<season>spring|summer|fall|autumn|winter)\s+(?:of\s+)?" + _YEAR + r"\b"),
    ),
    (
        "quarter",
        re.compile(
            r"(?i)\b(?:(?P<q>q[1-4])\s+|(?:the\s+)?(?P<qword>first|second|third|fourth)\s+quarter\s+of\s+)"
            + _YEAR
            + r"\b"
        ),
    ),
    ("half", re.compile(r"(?i)\b(?:the\s+)?(?P<half>first|second)\s+half\s+of\s+" + _YEAR + r"\b")),
    (
        "year",
        re.compile(
            r"(?i)\b(?:in|by|before|during|until|through|throughout|of|for|end\s+of)\s+" + _YEAR + r"\b"
        ),
    ),
]


@dataclass(frozen=True)
class TimeElement:
    """An explicit time reference in a question and the last day of the period it names."""

    phrase: str
    end: dt.date


def _month_end(year: int, month: int) -> dt.date:
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def _end_of(kind: str, m: re.Match) -> dt.date | None:
    year = int(m.group("year"))
    try:
        if kind == "iso":
            return dt.date(year, int(m.group("mnum")), int(m.group("day")))
        if kind in ("month_day_year", "day_month_year"):
            return dt.date(year, _MONTHS[m.group("month").lower()], int(m.group("day")))
        if kind == "month_year":
            return _month_end(year, _MONTHS[m.group("month").lower()])
        if kind == "season":
            month, shift = _SEASON_END[m.group("season").lower()]
            return _month_end(year + shift, month)
        if kind == "quarter":
            return _month_end(year, _QUARTER[(m.group("q") or m.group("qword")).lower()])
        if kind == "half":
            return _month_end(year, 6 if m.group("half").lower() == "first" else 12)
        return dt.date(year, 12, 31)
    except ValueError:  # an impossible date such as 2022-02-30
        return None


def time_element(question: str) -> TimeElement | None:
    """The explicit time element of a question: a date, a month, a season, a quarter, a half or
    a year (after a preposition), always with a year, as the paper's filter demands ("July"
    alone scores 0). Of several, the one whose period ends last (the question's horizon); a
    match overlapping a longer one does not count on its own. Relative phrases ("next month") and
    vague ones ("in the coming weeks") give None."""
    found: list[tuple[int, int, str, dt.date]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(question):
            end = _end_of(kind, m)
            if end is not None:
                found.append((m.start(), m.end(), m.group(0), end))
    kept: list[tuple[int, int, str, dt.date]] = []
    for span in sorted(found, key=lambda f: f[0] - f[1]):  # longest first
        if not any(s < span[1] and span[0] < e for s, e, _, _ in kept):
            kept.append(span)
    if not kept:
        return None
    _, _, phrase, end = max(kept, key=lambda f: (f[3], f[0]))
    return TimeElement(" ".join(phrase.split()), end)


# ------------------------------------------------------------------ checks
def structural_problem(question: str, resolution_date: dt.date) -> tuple[str, str] | None:
    """The post-filters that need no model, as ``(reason, detail)``: a question mark, no
    "according"/"article" (whole words, any case), and an explicit time element whose period
    ends no earlier than the day before the resolution date (the forecaster's cutoff)."""
    if "?" not in question:
        return "no_question_mark", question[:200]
    leak = _LEAK_WORDS.search(question)
    if leak:
        return "mentions_article", leak.group(0)
    element = time_element(question)
    if element is None:
        return "no_time_element", question[:200]
    if element.end < resolution_date - dt.timedelta(days=1):
        return "time_element_before_cutoff", f"{element.phrase!r} ends {element.end}"
    return None


def distractor_problem(answer: str, distractors: list[str]) -> tuple[str, str] | None:
    """Three distractors, none equal to the answer and no repeats (both ignoring case)."""
    folded = [d.casefold() for d in distractors]
    if clean_option(answer).casefold() in folded:
        return "distractor_equals_answer", repr(answer)
    if len(set(folded)) != 3:
        return "distractors_repeat", repr(distractors)
    return None


def keep(scores: list[int]) -> bool:
    """The keep rule: seven points in {0, 1, 2} summing to at least 13."""
    return len(scores) == 7 and all(p in (0, 1, 2) for p in scores) and sum(scores) >= KEEP_MIN_TOTAL


def shuffle_options(
    answer: str, distractors: list[str], global_seed: int, question_id: str
) -> tuple[list[str], int]:
    """The four options in a seeded order (``stable_seed(global_seed, "mc_shuffle", question_id)``)
    and the index of the answer among them."""
    options = [clean_option(answer), *distractors]
    order = list(range(4))
    random.Random(stable_seed(global_seed, "mc_shuffle", question_id)).shuffle(order)
    return [options[i] for i in order], order.index(0)


def output_problems(row: dict, mc: bool) -> list[str]:
    """What is wrong with one kept question row (``tables.TF_SCHEMA``/``MC_SCHEMA``); empty when
    it holds every invariant of the benchmark: a ``?``, a time element parsed from the question,
    resolution date = the source article's publication date (UTC), seven filter points summing to
    at least 13, a known category, and Yes for Q1 / No for Q2 or four distinct options with the
    gold one under the answer letter."""
    from udfs.daily_oracle.parsing import CATEGORIES

    problems = []
    question = row["question"]
    if "?" not in question or _LEAK_WORDS.search(question):
        problems.append("question fails the post-filters")
    element = time_element(question)
    if element is None or (element.phrase, element.end) != (row["time_element"], row["time_element_end"]):
        problems.append("time element does not parse from the question")
    if row["published_at"] is None or row["published_at"].astimezone(dt.UTC).date() != row["date"]:
        problems.append("resolution date is not the article's publication date")
    scores = list(row["filter_scores"] or [])
    if not keep(scores) or sum(scores) != row["filter_total"]:
        problems.append(f"filter scores {scores} / total {row['filter_total']}")
    if row["category"] not in CATEGORIES:
        problems.append(f"unknown category {row['category']!r}")
    if mc:
        choices = [row[f"choice_{letter}"] for letter in LETTERS]
        if len({c.casefold() for c in choices}) != 4 or not all(choices):
            problems.append(f"options not four distinct: {choices}")
        if row["answer"] not in LETTERS or choices[LETTERS.index(row["answer"])] != row["answer_text"]:
            problems.append("answer letter does not point at the answer")
    elif row["answer"] != TF_EXPECTED.get(row["question_index"]):
        problems.append(f"TF answer {row['answer']!r} for question {row['question_index']}")
    return problems
