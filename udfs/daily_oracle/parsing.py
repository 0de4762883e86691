"""Parsers of the four Daily Oracle steps and of the category label.

Each parser reads the whole assistant turn (the prompt's answer prefix plus the generated text)
and returns typed fields or raises ``ParseError`` with a short reason; the stage runner turns
that into a ``parse_error`` row. Validation the authors' code lacks (spec §8.9) lives here: the
question numbering, the distractor labels and the seven filter headings.
"""

from __future__ import annotations

import re
from typing import Any

from udfs.llm_parsing import ParseError, strip_answer

N_QUESTIONS = 4
NO_NEW_EVENT = "no new event"

FILTER_HEADINGS = (
    "Correctness",
    "Only Answerable on Publishing Date",
    "No New Information",
    "Objectiveness",
    "Clear Time Element",
    "Public Interest",
    "Answer Not Too Obvious",
)
CATEGORIES = (
    "Science & Tech",
    "Healthcare & Biology",
    "Economics & Business",
    "Environment & Energy",
    "Politics & Governance",
    "Education & Research",
    "Arts & Recreation",
    "Security & Defense",
    "Social Sciences",
    "Sports",
    "Other",
)
OTHER = "Other"

_QUOTES = "\"'“”‘’`"
_KEYPOINT = re.compile(r"(?i)\**\s*key\s?point\s*\**\s*:\s*\**")
_SUMMARY_LABEL = re.compile(r"(?i)^\s*\**\s*summary\s*\**\s*:\s*\**")
_HAS_WORD = re.compile(r"[A-Za-z0-9]")


def _clean(text: str) -> str:
    """Collapse whitespace and strip markdown emphasis and surrounding quotes."""
    return " ".join(text.split()).strip("* ").strip(_QUOTES).strip()


def parse_summary(text: str) -> dict[str, Any]:
    """``Summary: …`` then ``Keypoint: …`` → summary and keypoint.

    The text is split at the first keypoint label (``Keypoint:``, ``Key Point:``, ``Key point:``,
    any case, markdown bold allowed). The keypoint is the rest of that line, or the next non-empty
    line when the label stands alone. A missing or empty keypoint is a parse error."""
    match = _KEYPOINT.search(text or "")
    if match is None:
        raise ParseError("no Keypoint: line")
    summary = _clean(_SUMMARY_LABEL.sub("", text[: match.start()], count=1))
    rest = [line for line in text[match.end() :].splitlines() if line.strip()]
    keypoint = _clean(rest[0]) if rest else ""
    if not _HAS_WORD.search(keypoint):
        raise ParseError("empty keypoint")
    return {"summary": summary, "keypoint": keypoint}


def is_no_new_event(keypoint: str) -> bool:
    """The step-1 marker for articles without a new event (any case, anywhere in the keypoint)."""
    return NO_NEW_EVENT in keypoint.lower()


_QA_LINE = re.compile(r"(?im)^[ \t]*[*#]*[ \t]*(question|answer)[ \t]*(\d+)[ \t]*[*]*[ \t]*:[ \t]*(.*)$")


def parse_qa(text: str) -> dict[str, Any]:
    """``Question k: …`` / ``Answer k: …`` for k = 1..4 → four questions and four answers.

    Each label must appear exactly once for k = 1..4 and no other number may appear (the
    article is kept only when exactly four pairs parse). A question keeps any colon it contains.
    Surrounding quotes and markdown are stripped; an empty question or answer is an error."""
    found: dict[tuple[str, int], list[str]] = {}
    for kind, number, body in _QA_LINE.findall(text or ""):
        found.setdefault((kind.lower(), int(number)), []).append(_clean(body))
    expected = {(kind, k) for kind in ("question", "answer") for k in range(1, N_QUESTIONS + 1)}
    extra = sorted(f"{kind} {k}" for kind, k in set(found) - expected)
    missing = sorted(f"{kind} {k}" for kind, k in expected - set(found))
    repeated = sorted(f"{kind} {k}" for (kind, k), bodies in found.items() if len(bodies) > 1)
    if missing or extra or repeated:
        problems = [
            f"{name} {', '.join(v)}"
            for name, v in (("missing", missing), ("extra", extra), ("repeated", repeated))
            if v
        ]
        raise ParseError("expected 4 question-answer pairs: " + "; ".join(problems))
    questions = [found["question", k][0] for k in range(1, N_QUESTIONS + 1)]
    answers = [found["answer", k][0] for k in range(1, N_QUESTIONS + 1)]
    if not all(_HAS_WORD.search(s) for s in questions + answers):
        raise ParseError("empty question or answer")
    return {"questions": questions, "answers": answers}


_OPTION_LINE = re.compile(r"(?m)^[ \t]*[-*]?[ \t]*\(([bcd])\)[ \t]*(.+)$")


def clean_option(text: str) -> str:
    """An option as stored: trimmed of whitespace, quotes (backticks too) and trailing periods,
    repeated until nothing changes, so cleaning a cleaned option keeps it as is."""
    cleaned = None
    while cleaned != text:
        cleaned, text = text, strip_answer(text).strip(_QUOTES)
    return text


def parse_distractors(text: str) -> dict[str, Any]:
    """Lines ``(b) …``, ``(c) …``, ``(d) …`` → six distractors: the first three belong to the first
    MC question (Q3), the next three to the second (Q4). Fewer than six lines, labels out of
    the (b), (c), (d) order within a triple, or an option without a letter or digit (a copied
    ``...`` placeholder) is an error."""
    lines = _OPTION_LINE.findall(text or "")
    if len(lines) < 2 * 3:
        raise ParseError(f"expected 6 (b)/(c)/(d) lines, got {len(lines)}")
    labels = [label for label, _ in lines[:6]]
    if labels != ["b", "c", "d"] * 2:
        raise ParseError(f"labels out of order: {''.join(labels)}")
    options = [clean_option(body) for _, body in lines[:6]]
    if not all(_HAS_WORD.search(o) for o in options):
        raise ParseError("empty option")
    return {"distractors": options}


_QUESTION_BLOCK = re.compile(r"(?i)\*+[ \t]*question[ \t]*(\d+)[ \t]*\**")
_SECTION = re.compile(r"(?m)^[ \t]*##[ \t]*([^\n]*)$")
_POINT = re.compile(r"(?i)points?[ \t]*\**[ \t]*:[ \t]*\**[ \t]*(\d+)")


def _norm_heading(heading: str) -> str:
    return " ".join(heading.split(":", 1)[0].strip("*# ").lower().split())


_EXPECTED_HEADINGS = [_norm_heading(h) for h in FILTER_HEADINGS]


def score_block(block: str) -> list[int]:
    """The seven points of one question's block, in heading order; raises ParseError unless the
    block has exactly the seven expected headings, each with a point in {0, 1, 2}."""
    sections = list(_SECTION.finditer(block))
    headings = [_norm_heading(m.group(1)) for m in sections]
    if headings != _EXPECTED_HEADINGS:
        raise ParseError(f"expected the 7 headings in order, got {len(headings)}: {headings[:8]}")
    points = []
    for k, m in enumerate(sections):
        end = sections[k + 1].start() if k + 1 < len(sections) else len(block)
        point = _POINT.search(block, m.end(), end)
        if point is None:
            raise ParseError(f"no point under {FILTER_HEADINGS[k]!r}")
        value = int(point.group(1))
        if value not in (0, 1, 2):
            raise ParseError(f"point {value} under {FILTER_HEADINGS[k]!r} is not 0, 1 or 2")
        points.append(value)
    return points


def parse_filter(text: str) -> dict[str, Any]:
    """The judge's ``*Question k*`` blocks → per question (k = 1..4) its seven points, or the
    reason its block is unusable. Only an answer with no question block at all is a parse
    error, so one malformed block rejects one question, not four. Of several blocks with the same
    number the first non-empty one counts (a model that repeats the prefilled ``*Question 1*``
    header leaves an empty block before its real one)."""
    marks = [m for m in _QUESTION_BLOCK.finditer(text or "") if 1 <= int(m.group(1)) <= N_QUESTIONS]
    if not marks:
        raise ParseError("no *Question k* block")
    blocks: dict[int, str] = {}
    for k, m in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        number = int(m.group(1))
        if not blocks.get(number, "").strip():
            blocks[number] = text[m.end() : end]
    scores: list[list[int] | None] = []
    errors: list[str | None] = []
    raws: list[str | None] = []
    for k in range(1, N_QUESTIONS + 1):
        raws.append(blocks[k].strip() if k in blocks else None)
        try:
            if k not in blocks:
                raise ParseError(f"no block for question {k}")
            scores.append(score_block(blocks[k]))
            errors.append(None)
        except ParseError as exc:
            scores.append(None)
            errors.append(str(exc))
    return {"filter_scores": scores, "filter_errors": errors, "filter_blocks": raws}


def normalise_category(text: str | None) -> str:
    """One of the 11 labels: the text trimmed of whitespace, quotes and a trailing period,
    matched exactly ignoring case; anything else is ``Other``."""
    value = clean_option(text or "").lower()
    return next((c for c in CATEGORIES if c.lower() == value), OTHER)
