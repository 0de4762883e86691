"""The answer forms of the TCELongBench prompts, as regexes an engine enforces.

Each form is exactly what the stage's parser accepts (read after the prompt's answer prefix),
and is bounded so that an answer finishes inside the stage's token budget: a constrained answer
cut by ``max_tokens`` still fails. Text is bounded in words of at most ``WORD_CHARS`` characters,
``TOKENS_PER_WORD`` tokens each (English averages about 1.3); a digit costs a token, so numbers
are groups of at most four digits (no "100000000000" runs), and a date costs ten tokens.

- summaries: one paragraph of 5 or more words;
- key points: one to ``points`` bullets (the prefix opens the first ``*``) of 3 or more words;
- detail questions: ``<question of 3+ words>? Answer: <answer>``;
- forecast questions: the same, opening with one of the allowed openers and ending with a time
  reference to the row's day (``in|by|after|on <day>``), the day its only number (digits cost a
  token each): the paper's hard rules but "no 'before'", which stays a check after parsing;
- evidence: the verdict (``is correct.`` / ``may be wrong.``), then one sentence ending in
  ``.``, ``!`` or ``?``;
- distractors: ``(b)``, ``(c)`` and ``(d)`` lines (the prefix opens ``(b)``);
- entities: ``NONE`` or one to ``lines`` ``TYPE: name`` lines of spaCy's types;
- the voted checks: ``A|B|C. Q2: A|B|C`` after the ``Q1:`` prefix.
"""

from __future__ import annotations

import json
import math
from typing import Any

from udfs.prompts import regex_literal
from udfs.tcelongbench.qa import FORECAST_OPENERS

TOKENS_PER_WORD = 2
WORD_CHARS = 15
ENTITY_LABELS = ("PERSON", "NORP", "ORG", "GPE", "LOC", "FAC", "EVENT", "LAW", "DATE", "CARDINAL")
DAY_PATTERN = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"  # the prompt file's stand-in for a row's day
TIME_WORDS = ("in", "by", "after", "on")
VOTES = r" [ABC]\. Q2: [ABC]"
_NUMBER = "[0-9]{1,4}([,.:/-][0-9]{1,4}){0,2}"  # digit groups: a digit costs a token


def _word(other: str, head: str | None = None) -> str:
    """A word: up to ``WORD_CHARS`` characters of ``other`` (a class without digits; the first of
    ``head`` if given), or a number of at most three groups of at most four digits with a few of
    those characters before and after it ("G20", "13,000.", "2015-09-17", "1990s")."""
    first = head or other
    return f"({first}{other}{{0,{WORD_CHARS - 1}}}|({first}{other}{{0,9}})?{_NUMBER}{other}{{0,10}})"


_WORD = _word("[^\\s0-9]")
# A question word: no "?" (the first one ends the question), numbers of one group with a short
# suffix ("1990s", "15th"): questions rarely need more, and digits eat the budget.
_QWORD = f"([^\\s?0-9]{{1,{WORD_CHARS}}}|[0-9]{{1,4}}[^\\s?0-9]{{0,3}})"
_FWORD = f"[^\\s?0-9]{{1,{WORD_CHARS}}}"  # a forecast question's word: its day is its only number
_FIRST = _word("[^\\s0-9]", head="[A-Za-z]")  # starts with a letter or digit: never empty


def _clamp(value: float, low: int, high: int) -> int:
    return max(low, min(high, math.floor(value)))


def _words(first: str, word: str, low: int, high: int) -> str:
    """``low``..``high`` words separated by single spaces, the first one of form ``first``."""
    return f"{first}( {word}){{{max(0, low - 1)},{high - 1}}}"


def summary_regex(tokens: int) -> str:
    """One paragraph (no line break) of 5 or more words."""
    return "( " + _WORD + f"){{5,{_clamp((tokens - 1) / TOKENS_PER_WORD, 5, 160)}}}"


def key_points_regex(tokens: int) -> str:
    """One to ``points`` bullets of 3 or more words; the prefix opens the first ``*``."""
    points = _clamp(tokens / 24, 1, 8)
    words = _clamp((tokens / points - 2) / TOKENS_PER_WORD, 3, 24)
    point = " " + _words(_WORD, _WORD, 3, words)
    return point + (f"(\\n\\*{point}){{0,{points - 1}}}" if points > 1 else "")


def _answer_words(tokens: int) -> int:
    return _clamp((tokens - 4) / 8, 2, 10)


def qa_regex(tokens: int) -> str:
    """`` <question of 3+ words>? Answer: <answer>`` after the ``Question:`` prefix."""
    answer = _answer_words(tokens)
    question = _clamp((tokens - 4 - TOKENS_PER_WORD * answer) / TOKENS_PER_WORD, 3, 30)
    return f" {_words(_QWORD, _QWORD, 3, question)}\\? Answer: {_words(_FIRST, _WORD, 1, answer)}"


def forecast_regex(tokens: int, day: str | None = None) -> str:
    """A forecast question: an allowed opener, words, ``in|by|after|on <day>``, ``?``, then the
    answer. Without ``day`` any ``YYYY-MM-DD`` date stands in (the prompt file's form)."""
    date = regex_literal(day) if day else DAY_PATTERN
    rest = tokens - 2 - 1 - 10 - 4  # opener, time word, a date's characters, "? Answer:"
    answer = _clamp(rest / 6, 1, 10)
    words = _clamp((rest - TOKENS_PER_WORD * answer) / TOKENS_PER_WORD, 1, 24)
    openers = "|".join(FORECAST_OPENERS)
    times = "|".join(TIME_WORDS)
    return f" ({openers})( {_FWORD}){{1,{words}}} ({times}) {date}\\? Answer: " + _words(
        _FIRST, _WORD, 1, answer
    )


def forecast_output(tokens: int, day: str) -> str:
    """The per-row declaration of a forecast question about ``day`` (JSON, for a stage's
    ``structured_column``)."""
    return json.dumps({"regex": forecast_regex(tokens, day)})


def evidence_regex(tokens: int) -> str:
    """The verdict after ``The given answer``, then one sentence ending in ``.``, ``!`` or ``?``."""
    words = _clamp((tokens - 5) / TOKENS_PER_WORD, 3, 60)
    return f" (is correct|may be wrong)\\. {_words(_WORD, _WORD, 3, words)}[.!?]"


def distractors_regex(tokens: int) -> str:
    """Three one-line wrong answers ``(b)``, ``(c)``, ``(d)``; the prefix opens ``(b)``."""
    answer = " " + _words(_FIRST, _WORD, 1, _clamp((tokens - 6) / (3 * TOKENS_PER_WORD), 2, 12))
    return f"{answer}\\n\\(c\\){answer}\\n\\(d\\){answer}"


def entities_regex(tokens: int) -> str:
    """`` NONE`` or one to ``lines`` lines ``TYPE: name`` (a name of 1–4 words)."""
    lines = _clamp(tokens / 8, 1, 8)
    return f"( NONE|(\\n({'|'.join(ENTITY_LABELS)}): {_words(_WORD, _WORD, 1, 4)}){{1,{lines}}})"


FORMS: dict[str, Any] = {
    "article_summary": summary_regex,
    "day_summary": summary_regex,
    "key_points": key_points_regex,
    "detail_qa": qa_regex,
    "forecast_qa": forecast_regex,
    "evidence": evidence_regex,
    "distractors": distractors_regex,
    "entities": entities_regex,
    "forecast_check": lambda tokens: VOTES,
    "order_check": lambda tokens: VOTES,
}
