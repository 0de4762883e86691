"""S6/S8 — detail and forecast questions: the ``Question/Answer`` parser, the forecast question
rules, the Evidence verdict parser, Background 2 sampling, the ``(b)(c)(d)`` distractor parser and
the Plausible check."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np

from udfs.llm_parsing import ParseError, strip_answer

FORECAST_OPENERS = (
    "What will",
    "Who will",
    "Where will",
    "Which country will",
    "Why will",
    "How much",
    "How will",
    "How many",
)
DISTRACTOR_TYPES = ("misread", "other_day", "unsupported")  # choices (b), (c), (d)
PLAUSIBLE_MODES = ("brief", "paper")

_QA = re.compile(r"Question\s*:\s*(?P<q>[^\n]*?\?)\s*Answer\s*:\s*(?P<a>[^\n]*)", re.IGNORECASE)
_VERDICT = re.compile(r"the given answer (?P<v>is correct|may be wrong)\s*[.!:]?", re.IGNORECASE)
_LEAD_IN = re.compile(r"^[^:]{0,60}\b(?:sentence|evidence)\b[^:]{0,60}:\s*", re.IGNORECASE)
_LABEL = re.compile(r"^\s*[-*]?\s*\(\s*([a-dA-D])\s*\)\s*(.*)$")


def parse_qa(text: str) -> dict[str, str]:
    """``Question: <q>? Answer: <a>.`` → question (ending in ``?``) and answer (one line, trailing
    period and quotes removed). The first well-formed pair counts."""
    m = _QA.search(text or "")
    if not m:
        raise ParseError("no 'Question: …? Answer: …' pair")
    question = " ".join(m.group("q").split())
    answer = strip_answer(m.group("a"))
    if len(question.rstrip("?").split()) < 3:
        raise ParseError("question shorter than 3 words")
    if not answer:
        raise ParseError("empty answer")
    return {"question": question, "answer": answer}


def forecast_question_problems(question: str, day: str) -> list[str]:
    """The hard rules a forecast question breaks: an allowed opener, the ``Day`` string present,
    no "before" (case-insensitive)."""
    problems = []
    if not question.startswith(FORECAST_OPENERS):
        problems.append("opener")
    if day not in question:
        problems.append("no_day")
    if re.search(r"\bbefore\b", question, re.IGNORECASE):
        problems.append("before")
    return problems


def copied_example(question: str, template: str) -> bool:
    """Whether the question occurs in the prompt template itself, i.e. the model echoed one of the
    few-shot examples instead of writing a question about the article."""
    return " ".join(question.casefold().split()) in " ".join(template.casefold().split())


def parse_evidence(text: str) -> dict[str, Any]:
    """The Evidence verdict and the quoted sentence: ``evidence_pass`` is True only for "The given
    answer is correct"; the sentence is the first non-empty line after the verdict, without a
    lead-in such as "The original sentence is:" and without quotes. A missing verdict or sentence
    is a parse error."""
    m = _VERDICT.search(text or "")
    if not m:
        raise ParseError("no 'The given answer is correct / may be wrong' verdict")
    sentence = ""
    for line in text[m.end() :].splitlines():
        sentence = _LEAD_IN.sub("", line.strip()).strip("\"'“”‘’ ")
        if sentence:
            break
    if not sentence:
        raise ParseError("verdict without a sentence")
    return {"evidence_pass": m.group("v").lower() == "is correct", "evidence_sentence": sentence}


def pick_background(
    articles_by_day: dict[int, Sequence[str]], gold_k: int, allowed_days: Sequence[int], seed: int
) -> tuple[int, str] | None:
    """Background 2: a uniformly random day among ``allowed_days`` other than ``gold_k``, then a
    uniformly random article of that day (ids sorted first, so the draw depends only on the seed).
    None when no other day is allowed."""
    days = sorted(k for k in allowed_days if k != gold_k and articles_by_day.get(k))
    if not days:
        return None
    rng = random.Random(seed)
    day = rng.choice(days)
    return day, rng.choice(sorted(articles_by_day[day]))


def parse_distractors(text: str) -> dict[str, str]:
    """Three labelled wrong answers ``(b)``, ``(c)``, ``(d)`` (one line each, in that order) →
    ``distractor_b/c/d``. Anything after ``(d)``'s line is ignored; a missing, empty, repeated
    or out-of-order label is a parse error."""
    found: dict[str, str] = {}
    expected = iter("bcd")
    want = next(expected)
    for line in (text or "").splitlines():
        m = _LABEL.match(line)
        if not m:
            continue
        label = m.group(1).lower()
        if label == "a":
            continue
        if label != want:
            raise ParseError(f"expected ({want}), got ({label})")
        value = strip_answer(m.group(2))
        if not value:
            raise ParseError(f"empty ({label})")
        found[label] = value
        want = next(expected, None)
        if want is None:
            break
    if want is not None:
        raise ParseError(f"missing ({want})")
    return {f"distractor_{k}": v for k, v in found.items()}


def normalize_choice(text: str) -> str:
    """Casefolded, punctuation-free, whitespace-collapsed text (for the uniqueness test)."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def plausible_problems(
    choices: Sequence[str], sims: np.ndarray, mode: str, max_word_spread: int = 10, max_cosine: float = 0.8
) -> list[str]:
    """Why a 4-choice set (correct answer first) fails the Plausible check; ``sims`` is the 4×4
    cosine matrix of the choices.

    ``brief``: 4 unique normalised choices, word-count spread (max − min) ≤ ``max_word_spread`` and
    all 6 pairwise cosines ≤ ``max_cosine``. ``paper``: each distractor is within fewer than
    ``max_word_spread`` words of the correct answer's length and has cosine ≤ ``max_cosine`` to it.
    """
    if mode not in PLAUSIBLE_MODES:
        raise ValueError(f"plausible mode must be one of {PLAUSIBLE_MODES}")
    if len(choices) != 4:
        return ["not_four_choices"]
    words = [len(c.split()) for c in choices]
    problems = []
    if mode == "brief":
        if len({normalize_choice(c) for c in choices}) != 4:
            problems.append("duplicate_choice")
        if max(words) - min(words) > max_word_spread:
            problems.append("length_spread")
        if any(sims[i, j] > max_cosine for i, j in combinations(range(4), 2)):
            problems.append("too_similar")
    else:
        if any(abs(w - words[0]) >= max_word_spread for w in words[1:]):
            problems.append("length_spread")
        if any(sims[0, j] > max_cosine for j in range(1, 4)):
            problems.append("too_similar")
    return problems


def evidence_match(sentence: str, article: str) -> float:
    """How well the quoted evidence sentence matches the article text, in [0, 1] (best partial
    fuzzy match over whitespace-collapsed text)."""
    from rapidfuzz import fuzz

    return fuzz.partial_ratio(" ".join(sentence.split()), " ".join(article.split())) / 100.0
