"""The answer forms the Daily Oracle prompts declare (structured outputs), built from their bounds.

Each generate prompt declares its form at full size under ``output:`` (a regex over the text that
follows the prompt's answer prefix); the functions here build the same forms with other bounds,
and a unit test checks that the full-size build equals the declaration. When a run caps
generation (``--max-new-tokens``) below a prompt's own ``max_tokens``, the stage sends the form
fitted to the cap (``fitted``): shorter strings, and no reasoning lines in the filter when the
cap leaves no room for them, so that an answer can finish inside the cap.

The forms are the paper's formats, with what the prompts ask for made exact: questions 1 and 2
start with "Will" and are answered "Yes." and "No.", questions 3 and 4 start with a wh-phrase,
every question ends with its time element ("... in September 2022?", one of the forms the prompt
shows; the post-filters still check that it is not before the article's date) and holds no
parenthesis, colon or "..." (so the template lines cannot be copied as a question), answers and options start with a letter or digit (after an
optional quote), options are labelled (b), (c), (d), and the filter scores each of
the seven headings 0, 1 or 2. A summary holds no colon, so its keypoint label is found exactly;
a filter reasoning holds no ``*`` or colon, so it can neither open a question block nor read as
a point.
"""

from __future__ import annotations

from typing import Any

from udfs.daily_oracle.parsing import FILTER_HEADINGS
from udfs.prompts import regex_literal

CHARS_PER_TOKEN = 3
SUMMARY_CHARS, KEYPOINT_CHARS = 1000, 300
QUESTION_CHARS, ANSWER_CHARS = 200, 100
OPTION_CHARS = 100
REASONING_CHARS = 150
MIN_REASONING = 20  # shorter room for a reasoning drops the reasoning lines altogether
WH = ("What", "Who", "Where", "Which", "How much", "How many")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
TIME = "(?:in|by) (?:" + "|".join(MONTHS) + ") (?:19|20)[0-9]{2}"  # the question's time element

# fixed tokens of each form (labels, markers, headings), measured with the embedded model's
# tokenizer and rounded up
SUMMARY_OVERHEAD, QA_OVERHEAD, DISTRACTORS_OVERHEAD = 8, 88, 40
FILTER_OVERHEAD, REASONING_LINE = 340, 5  # the 28 sections without reasoning; per reasoning line


_NO_COLON, _REASON_FIRST, _REASON = r"[^\n:]", r"[^\s*:]", r"[^\n*:]"
_QUOTED = "['\"]?[A-Za-z0-9]"  # an answer or option may come in quotes, as the prompts show them
# A question's wording: one character that is no parenthesis, colon or "?", or a dot followed by
# one, so that "..." and the prompt's template "(or Who will, ...)" cannot be copied; a unit is
# at most two characters. A dot may end the wording ("... by Gov. in May 2023?").
_WORDING = r"(?:[^\n?.():]|\.[^\n?.():])"


def _text(chars: int, first: str = "[A-Za-z0-9]", rest: str = r"[^\n]") -> str:
    """One line starting with a letter or digit, at most ``chars`` characters."""
    return f"{first}{rest}{{0,{max(chars, 1) - 1}}}"


def summary_output(summary: int = SUMMARY_CHARS, keypoint: int = KEYPOINT_CHARS) -> dict[str, Any]:
    """After ``Summary:``: a one-line summary without colons, then the ``Keypoint:`` line."""
    line = _text(summary, rest=_NO_COLON)
    return {"regex": f" {line}\\nKeypoint: {_text(keypoint)}\\n?"}


def qa_output(
    question: int = QUESTION_CHARS, answer: int = ANSWER_CHARS, month_year: str | None = None
) -> dict[str, Any]:
    """After ``Question 1:``: four question-answer pairs; 1 and 2 are Will-questions answered
    Yes. and No., 3 and 4 wh-questions with a short answer. Each question ends with its time
    element, ``in`` or ``by`` a month and year: any (the prompt's declaration) or the article's
    own ``month_year`` (the form the builder sends per article). ``question`` bounds the wording
    before the time element (at most ``question`` characters; dots are rare, so it is usually
    about half that)."""
    time = TIME if month_year is None else f"(?:in|by) {regex_literal(month_year)}"
    body = f"[A-Za-z]{_WORDING}{{1,{max(question // 2, 2)}}}\\.? {time}\\?"
    will, wh = f"Will {body}", "(?:" + "|".join(WH) + f") {body}"
    value = _text(answer, first=_QUOTED)
    return {
        "regex": f" {will}\\nAnswer 1: Yes\\.\\nQuestion 2: {will}\\nAnswer 2: No\\."
        f"\\nQuestion 3: {wh}\\nAnswer 3: {value}\\nQuestion 4: {wh}\\nAnswer 4: {value}\\n?"
    }


def distractors_output(option: int = OPTION_CHARS) -> dict[str, Any]:
    """After ``Noising Answers 1:``: options (b), (c), (d) of question 1, then of question 2."""
    value = _text(option, first=_QUOTED)
    triple = "".join(f"\\n\\({letter}\\) {value}" for letter in "bcd")
    return {"regex": f" ?{triple}\\nNoising Answers 2:{triple}\\n?"}


def filter_output(reasoning: int = REASONING_CHARS) -> dict[str, Any]:
    """After ``*Question 1*``: for each of the four questions the seven headings, each with a
    reasoning line (when ``reasoning`` > 0) and a point 0, 1 or 2."""
    why = f"\\n- Reasoning: {_text(reasoning, first=_REASON_FIRST, rest=_REASON)}" if reasoning else ""
    block = "".join(f"\\n## {heading}{why}\\n- Point: [012]" for heading in FILTER_HEADINGS)
    blocks = block + "".join(f"\\n\\*Question {k}\\*{block}" for k in range(2, 5))
    return {"regex": f"{blocks}\\n?"}


def _clamp(value: float, low: int, high: int) -> int:
    return int(max(low, min(high, value)))


def qa_form(month_year: str | None, budget: int | None = None) -> dict[str, Any]:
    """The qa form of an article of ``month_year`` (None: any month), fitted to ``budget`` new
    tokens (None: full size)."""
    if budget is None:
        return qa_output(month_year=month_year)
    question = _clamp((budget - QA_OVERHEAD) * CHARS_PER_TOKEN / 5, 12, QUESTION_CHARS)
    return qa_output(question, _clamp(question / 2, 4, ANSWER_CHARS), month_year)


def fitted(prompt_id: str, budget: int) -> dict[str, Any] | None:
    """The answer form of ``prompt_id`` bounded to finish within ``budget`` new tokens (None for a
    prompt without a generated answer form)."""
    name = prompt_id.removeprefix("daily_oracle.")
    if name == "summary":
        free = (budget - SUMMARY_OVERHEAD) * CHARS_PER_TOKEN
        keypoint = _clamp(free * 0.6, 20, KEYPOINT_CHARS)
        return summary_output(_clamp(free - keypoint, 10, SUMMARY_CHARS), keypoint)
    if name == "qa":
        return qa_form(None, budget)
    if name == "distractors":
        return distractors_output(
            _clamp((budget - DISTRACTORS_OVERHEAD) * CHARS_PER_TOKEN / 6, 4, OPTION_CHARS)
        )
    if name == "filter":
        room = (budget - FILTER_OVERHEAD - 28 * REASONING_LINE) * CHARS_PER_TOKEN / 28
        return filter_output(_clamp(room, 0, REASONING_CHARS) if room >= MIN_REASONING else 0)
    return None
