"""Parsers of the PROPHET evidence prompts: query lists (a)–(c) and relevance ratings (d).

The query prompts end with an answer prefix that opens the JSON list (``Output: ["``), and their
declared answer form (``udfs.prophet.outputs.query_regex``) is the rest of the list up to its
``]``; a model that writes the whole list itself is accepted too, and so is a list cut short by
``max_tokens`` (its complete items are kept) when no form is declared. A string item the JSON decoder refuses (an invalid escape such as
``S\\&P``) ends the list like a cut: the items before it are kept. Items without a word
character, and items that merely copy the prompt's format example ("entity 1", "query 2", …),
are no queries and are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from udfs.llm_parsing import ParseError, json_string_list

_RATING = re.compile(r"rating\**\s*:\s*\**\s*([1-6])(?!\d)", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"(entity|event|query|step)\s*\d+", re.IGNORECASE)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BETWEEN_ITEMS = re.compile(r"\s*,?\s*")
_WORD = re.compile(r"\w")


def _cut_list(text: str) -> list[str] | None:
    """The complete string items of a JSON list of strings that was cut off, or None when the text
    is not such a list. An item JSON cannot decode ends the list there, like a cut."""
    if not text.startswith("["):
        return None
    items, pos = [], 1
    while True:
        gap = _BETWEEN_ITEMS.match(text, pos)
        pos = gap.end() if gap else pos
        m = _JSON_STRING.match(text, pos)
        if not m:
            break
        try:
            items.append(json.loads(m.group(0)))
        except json.JSONDecodeError:
            break
        pos = m.end()
    rest = text[pos:].strip()
    return items if items and (not rest or rest.startswith('"')) else None


def parse_query_list(text: str, limit: int | None = None) -> dict[str, Any]:
    """``{"queries": [...]}``: the strings of the list with a word character, without format
    placeholders and duplicates (ignoring case), at most ``limit`` of them. Raises ParseError
    when none is left."""
    body = (text or "").strip()
    items: list[str] | None = None
    error: ParseError | None = None
    for candidate in (body, '["' + body, '["' + body + "]"):
        try:
            items = json_string_list(candidate)
            break
        except ParseError as exc:
            error = error or exc
    if items is None:
        items = _cut_list('["' + body)
    if not items:
        raise error or ParseError("no JSON list in the answer")
    seen: set[str] = set()
    queries = []
    for item in (" ".join(i.split()) for i in items):
        if _WORD.search(item) and not _PLACEHOLDER.fullmatch(item) and item.lower() not in seen:
            seen.add(item.lower())
            queries.append(item)
    if not queries:
        raise ParseError("no usable query in the list")
    return {"queries": queries[:limit] if limit else queries}


def parse_rating(text: str) -> dict[str, Any]:
    """``{"rating": n}`` from the last ``Rating: n`` (n in 1–6) of the answer."""
    matches = _RATING.findall(text or "")
    if not matches:
        raise ParseError("no 'Rating: 1-6' in the answer")
    return {"rating": int(matches[-1])}


def expected_rating(options: Sequence[str], probs: Sequence[float]) -> int:
    """The rating of a scored answer: the probability-weighted mean of the options 1–6, rounded
    half up. The mean uses the whole distribution, where the most probable option alone would
    throw away how the rest of the mass leans."""
    mean = sum(int(o) * p for o, p in zip(options, probs, strict=True)) / sum(probs)
    return min(6, max(1, int(mean + 0.5)))
