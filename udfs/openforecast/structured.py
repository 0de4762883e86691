"""Structured (open) events: parsing the extraction answer and comparing events by arguments.

The extraction prompt declares its answer as a JSON list of objects with ``type``, ``trigger``,
``time``, ``location``, ``subject``, ``object`` and an ``extra`` object for other roles
(``prompts/openforecast/event_struct.yaml``; ``udfs.openforecast.outputs.struct_output``).
Answers from a backend that does not enforce it are parsed leniently: the first JSON list in
the text (or ``None``), unknown keys go to ``extra``, and placeholder argument values such as
"unknown" become null. An event is kept when its type or trigger names something (has a letter).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from udfs.llm_parsing import ParseError, first_json

ARGUMENTS = ("type", "trigger", "time", "location", "subject", "object")
QUESTION_ARGUMENTS = ("time", "location", "subject", "object")  # besides type, which is always allowed
_LABELS = ("type", "trigger")
_LETTER = re.compile(r"[^\W\d_]")
_PLACEHOLDER = re.compile(
    r"^\W*(none|null|n/?a|unknown|unspecified|not (?:given|stated|specified))?\W*$", re.I
)


def _value(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = " ".join(str(value).split())
    return None if _PLACEHOLDER.match(text) else text


def _label(value: Any) -> str | None:
    """A type or trigger: its text when it holds a letter (``none`` is a word like any other)."""
    if value is None or isinstance(value, dict | list):
        return None
    text = " ".join(str(value).split())
    return text if _LETTER.search(text) else None


def _complete_objects(text: str) -> list[Any]:
    """Every complete JSON object in a list cut short (generation stopped inside it)."""
    decoder, found = json.JSONDecoder(), []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        found.append(value)
        start = text.find("{", end)
    return found


def parse_structured(text: str) -> dict[str, str]:
    """The events as a normalised JSON string (``structured_json``); ``None`` gives ``[]``. A
    list cut short keeps its complete objects."""
    stripped = (text or "").strip()
    if re.match(r"^\W*none\b", stripped, re.IGNORECASE):
        return {"structured_json": "[]"}
    try:
        items = first_json(stripped, list)
    except ParseError:
        items = _complete_objects(stripped[stripped.find("[") :]) if "[" in stripped else []
        if not items:
            raise
    events = []
    for item in items:
        if not isinstance(item, dict):
            raise ParseError("a structured event is not a JSON object")
        lowered = {str(k).strip().lower(): v for k, v in item.items()}
        event = {k: (_label if k in _LABELS else _value)(lowered.get(k)) for k in ARGUMENTS}
        extra = lowered.get("extra") if isinstance(lowered.get("extra"), dict) else {}
        extra = {**extra, **{k: v for k, v in lowered.items() if k not in (*ARGUMENTS, "extra")}}
        event["extra"] = {str(k): v for k, v in ((k, _value(v)) for k, v in extra.items()) if v}
        if event["type"] or event["trigger"]:
            events.append(event)
    if items and not events:
        raise ParseError("no structured event has a type or trigger")
    return {"structured_json": json.dumps(events, ensure_ascii=False, sort_keys=True)}


def load(structured_json: str | None) -> list[dict[str, Any]] | None:
    """The parsed events of a ``structured_json`` cell (None when extraction failed)."""
    return None if structured_json is None else json.loads(structured_json)


def has_argument(events: Sequence[dict[str, Any]] | None, argument: str) -> bool:
    return any(e.get(argument) for e in events or ())


def argument_counts(per_event: Iterable[Sequence[dict[str, Any]] | None]) -> dict[str, int]:
    """Non-null values of each question argument across a CE's structured events."""
    counts = dict.fromkeys(QUESTION_ARGUMENTS, 0)
    for events in per_event:
        for e in events or ():
            for a in QUESTION_ARGUMENTS:
                counts[a] += bool(e.get(a))
    return counts


def _norm(value: Any) -> str:
    return " ".join(str(value).casefold().split()) if value else ""


def timeless_key(event: dict[str, Any]) -> tuple:
    """An event's arguments without its time, normalised for comparison."""
    extra = tuple(sorted((_norm(k), _norm(v)) for k, v in (event.get("extra") or {}).items()))
    return (*(_norm(event.get(a)) for a in ARGUMENTS if a != "time"), extra)


def really_happened(
    negative: Sequence[dict[str, Any]], future: Iterable[Sequence[dict[str, Any]] | None]
) -> bool:
    """The MCNC leak rule: every structured event of a negative candidate is, time aside, one of
    the structured events of the timeline after the cut. Needs at least one event to compare."""
    if not negative:
        raise ValueError("a negative without structured events cannot be checked")
    seen = {timeless_key(e) for events in future for e in events or ()}
    return all(timeless_key(e) in seen for e in negative)
