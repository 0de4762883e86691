"""Parsers for raw LLM text shared by every builder. Each is a pure function that either returns
typed values or raises ParseError with a short reason; the stage runner turns the error into a
``parse_error`` row, so a malformed answer never stops a job."""

from __future__ import annotations

import json
import re
from typing import Any


class ParseError(ValueError):
    """The model's text does not contain what the prompt asked for."""


def check_output(output: dict[str, Any], text: str) -> None:
    """Raise ParseError unless ``text`` is an answer of the declared ``output`` form (a JSON
    document valid under the schema, a full match of the regex, or one of the choices)."""
    ((how, value),) = output.items()
    if how == "json":
        import jsonschema

        try:
            jsonschema.validate(json.loads(text), value)
        except json.JSONDecodeError as exc:
            raise ParseError(f"output is not a JSON document ({exc.msg})") from exc
        except jsonschema.ValidationError as exc:
            raise ParseError(f"output JSON does not match the schema ({exc.message[:120]})") from exc
    elif how == "regex":
        if re.fullmatch(value, text, flags=re.DOTALL) is None:
            raise ParseError("output does not match the declared pattern")
    elif text not in value:
        raise ParseError("output is none of the declared choices")


_STAR_DECIMAL = re.compile(r"\*\s*(0(?:\.\d+)?|1(?:\.0+)?|\.\d+)\s*\*")


def parse_verbalized_probability(text: str) -> dict[str, float]:
    """The last asterisk-wrapped decimal in [0, 1], e.g. ``*0.62*`` → ``{"prob": 0.62}``."""
    matches = _STAR_DECIMAL.findall(text or "")
    if not matches:
        raise ParseError("no *decimal* probability in the answer")
    return {"prob": float(matches[-1])}


def strip_answer(text: str) -> str:
    """Trim whitespace, surrounding quotes and a trailing period."""
    return (text or "").strip().strip("\"'“”‘’").strip().rstrip(".").strip()


def _balanced_span(text: str, open_char: str, close_char: str) -> str | None:
    """The first balanced ``open…close`` span, ignoring brackets inside JSON strings."""
    start = text.find(open_char)
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c == open_char:
                depth += 1
            elif c == close_char:
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find(open_char, start + 1)
    return None


def first_json(text: str, kind: type = list) -> Any:
    """The first JSON list (or object, with ``kind=dict``) embedded in ``text``."""
    open_char, close_char = ("[", "]") if kind is list else ("{", "}")
    span = _balanced_span(text or "", open_char, close_char)
    if span is None:
        raise ParseError(f"no JSON {kind.__name__} in the answer")
    try:
        value = json.loads(span)
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON {kind.__name__}: {exc.msg}") from exc
    if not isinstance(value, kind):
        raise ParseError(f"expected a JSON {kind.__name__}")
    return value


def json_string_list(text: str, expected: int | None = None) -> list[str]:
    """A JSON list of non-empty strings, optionally of an exact length."""
    items = first_json(text, list)
    if not all(isinstance(x, str) for x in items):
        raise ParseError("JSON list holds non-strings")
    items = [x.strip() for x in items if x.strip()]
    if not items:
        raise ParseError("empty list")
    if expected is not None and len(items) != expected:
        raise ParseError(f"expected {expected} items, got {len(items)}")
    return items


_NUMBERED = re.compile(r"(?m)^\s*(\d{1,3})[.)]\s+")


def numbered_list(text: str) -> list[str]:
    """Items of a ``1. … 2. …`` list at line starts. Numbering must start at 1; a marker that is
    out of sequence is kept as text of the item before it. Empty items are dropped."""
    text = text or ""
    marks = list(_NUMBERED.finditer(text))
    items: list[str] = []
    expected = 1
    starts: list[tuple[int, int]] = []
    for m in marks:
        if int(m.group(1)) == expected:
            starts.append((m.start(), m.end()))
            expected += 1
    if not starts:
        raise ParseError("no numbered list starting at 1.")
    for k, (_, body_start) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        item = " ".join(text[body_start:end].split())
        if item:
            items.append(item)
    if not items:
        raise ParseError("numbered list is empty")
    return items


def labelled_fields(text: str, labels: list[str]) -> dict[str, str]:
    """Values of ``Label: value`` fields (value runs to the next label); every label required."""
    pattern = re.compile(
        r"(?im)^\s*[*#]*\s*(" + "|".join(re.escape(lb) for lb in labels) + r")\s*[*#]*\s*:\s*"
    )
    hits = list(pattern.finditer(text or ""))
    found: dict[str, str] = {}
    for k, m in enumerate(hits):
        end = hits[k + 1].start() if k + 1 < len(hits) else len(text)
        key = next(lb for lb in labels if lb.lower() == m.group(1).lower())
        found.setdefault(key, text[m.end() : end].strip())
    missing = [lb for lb in labels if not found.get(lb)]
    if missing:
        raise ParseError(f"missing fields {missing}")
    return found
