"""The answer forms the OpenForecast prompts declare (structured outputs), built from their bounds.

Each prompt file declares its form at full size under ``output:``; the functions here build the
same forms with other bounds, and a unit test checks that the full-size build equals the
declaration. Two uses:

- ``fitted``: when a run caps generation (``--max-new-tokens``) below a prompt's own
  ``max_tokens``, the stage sends the form with fewer items and shorter strings, so that an answer
  can finish inside the cap (a constrained answer cut short is still a parse failure).
- ``reorder_output``: the chronology adjustment's answer depends on the row: every line is one
  of the timeline's own items, copied verbatim.

Budgets are estimated at ``CHARS_PER_TOKEN`` characters per token (measured on English news
sentences and on the structured-event JSON with the embedded model's tokenizer), plus the fixed
tokens of labels and list markers. Every free-text part starts with a visible character, so the
parsers never see an empty item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from udfs.openforecast.structured import ARGUMENTS
from udfs.prompts import regex_literal

CHARS_PER_TOKEN = 3
DATE = r"[12][0-9]{3}(?:-(?:0[1-9]|1[0-2])(?:-(?:0[1-9]|[12][0-9]|3[01]))?)?"  # years 1000-2999

# Full sizes (the prompt files' declarations; each fits its prompt's max_tokens).
TIMELINE_ITEMS, TIMELINE_CHARS = 40, 250
MARKER_TOKENS = 4  # "\n12. " and the item's first token
STRUCT_ITEMS, STRUCT_CHARS = 4, 60
STRUCT_OVERHEAD = 34  # keys, quotes and brackets of one structured event (measured: 33)
NEGATIVE_CHARS = 150
QUESTION_CHARS, ANSWER_CHARS = 200, 80
_MIN_CHARS = 8
FITTED_ITEM_CHARS = (40, 120)  # a capped timeline item: budget / 2 characters, within these bounds


def _text(chars: int, first: str = r"[^\s]") -> str:
    """Free text on one line: a visible first character, at most ``chars`` characters."""
    return f"{first}[^\\n]{{0,{max(chars, 1) - 1}}}"


def date_output(unknown: bool) -> dict[str, Any]:
    """A date ``yyyy[-MM[-dd]]`` after ``Date:``; ``Unknown`` too for an atomic event's time."""
    body = f"(?:{DATE}|Unknown)" if unknown else DATE
    return {"regex": f" ?{body}\\n?"}


def numbered_list(items: int, chars: int) -> str:
    """A numbered list continuing the prompt's ``1.`` marker: ``items`` at most, each one line of
    at most ``chars`` characters, numbered 2., 3., … in sequence; an optional final newline lets
    the model stop there."""
    item = _text(chars)
    tail = ""
    for k in range(items, 1, -1):
        tail = f"(?:\\n{k}\\. {item}{tail})?"
    return f" {item}{tail}\\n?"


def timeline_output(items: int = TIMELINE_ITEMS, chars: int = TIMELINE_CHARS) -> dict[str, Any]:
    return {"regex": numbered_list(items, chars)}


def reorder_output(events: Sequence[str]) -> dict[str, Any]:
    """The adjustment of one timeline: as many lines as it has items, each one of its items
    verbatim (the permutation guard then checks that none is repeated)."""
    choice = "(?:" + "|".join(regex_literal(e.strip()) for e in dict.fromkeys(events)) + ")"
    lines = "".join(f"\\n{k}\\. {choice}" for k in range(2, len(events) + 1))
    return {"regex": f" {choice}{lines}\\n?"}


def struct_output(items: int = STRUCT_ITEMS, chars: int = STRUCT_CHARS) -> dict[str, Any]:
    """A JSON list of 1..``items`` structured events. ``type`` and ``trigger`` start with a letter
    (the parser keeps an event by them); the other arguments are strings or null; ``extra`` holds
    at most the ``content`` role."""
    label = {"type": "string", "pattern": f"^[A-Za-z][A-Za-z0-9 ,.'-]{{0,{chars - 1}}}$"}
    value = {"type": ["string", "null"], "maxLength": chars}
    properties: dict[str, Any] = {a: label if a in ("type", "trigger") else value for a in ARGUMENTS}
    properties["extra"] = {
        "type": "object",
        "properties": {"content": {"type": "string", "maxLength": chars}},
        "additionalProperties": False,
    }
    event = {
        "type": "object",
        "properties": properties,
        "required": list(ARGUMENTS),
        "additionalProperties": False,
    }
    return {"json": {"type": "array", "items": event, "minItems": 1, "maxItems": items}}


def negatives_output(chars: int = NEGATIVE_CHARS) -> dict[str, Any]:
    """Three negatives after ``A:``, on lines ``B:`` and ``C:``."""
    negative = _text(chars, "[A-Za-z0-9]")
    return {"regex": f" {negative}\\nB: {negative}\\nC: {negative}\\n?"}


def mcac_output(question: int = QUESTION_CHARS, answer: int = ANSWER_CHARS) -> dict[str, Any]:
    """After ``Question:``: a question ending in ``?``, its true answer and three wrong ones."""
    ask = f"[A-Za-z][^\\n?]{{0,{max(question, 2) - 2}}}\\?"
    value = _text(answer, "[A-Za-z0-9]")
    labels = ("True answer", "Wrong answer A", "Wrong answer B", "Wrong answer C")
    return {"regex": f" {ask}" + "".join(f"\\n{label}: {value}" for label in labels) + "\\n?"}


def _per_token(chars: int) -> float:
    return chars / CHARS_PER_TOKEN


def fitted(prompt_id: str, budget: int) -> dict[str, Any] | None:
    """The answer form of ``prompt_id`` bounded to finish within ``budget`` new tokens (None: a
    form of fixed size, which fits as declared)."""
    name = prompt_id.removeprefix("openforecast.")
    if name in ("extract_news", "extract_wiki", "complement", "merge", "adjust"):
        chars = max(FITTED_ITEM_CHARS[0], min(FITTED_ITEM_CHARS[1], budget // 2))
        items = int(budget // (_per_token(chars) + MARKER_TOKENS))
        return timeline_output(max(1, min(TIMELINE_ITEMS, items)), chars)
    if name == "event_struct":
        chars = int(max(_MIN_CHARS, min(STRUCT_CHARS, (budget - STRUCT_OVERHEAD) * CHARS_PER_TOKEN / 7)))
        items = int(budget // (STRUCT_OVERHEAD + 7 * _per_token(chars)))
        return struct_output(max(1, min(STRUCT_ITEMS, items)), chars)
    if name == "mcnc_negatives":
        return negatives_output(int(max(_MIN_CHARS, min(NEGATIVE_CHARS, (budget - 9) * CHARS_PER_TOKEN / 3))))
    if name == "mcac_question":
        free = (budget - 24) * CHARS_PER_TOKEN
        return mcac_output(
            int(max(_MIN_CHARS, min(QUESTION_CHARS, free / 2))), int(max(4, min(ANSWER_CHARS, free / 8)))
        )
    return None
