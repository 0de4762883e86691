"""Timelines: parsing the model's numbered lists, and the rules applied between rounds.

Every timeline prompt ends its answer with the marker ``1.`` already written (``LIST_PREFIX``,
the prompts' ``answer_prefix``), so the model continues the first item; the parser puts the
marker back. A reply of ``None`` is an empty timeline (the article has none). A paragraph that
does not start with a list marker ends the list, so trailing prose is not glued to the last item,
and a bare marker where generation stopped (``…\n3.``) is dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from udfs.llm_parsing import ParseError, numbered_list

LIST_PREFIX = "1."
MERGE_RETENTION = 0.8  # a complement answer keeping fewer previous items than this is merged
_MARKER = re.compile(r"^\s*\d{1,3}[.)]\s")
_NONE = re.compile(r"^\W*none\W*$", re.IGNORECASE)
_BARE_MARKER = re.compile(r"\n\s*\d{1,3}[.)]?\s*$")  # "…\n3." where generation stopped


def parse_timeline(text: str) -> dict[str, list[str]]:
    """Items of a numbered-list answer that continues ``LIST_PREFIX``; exact repeats keep their
    first occurrence and ``None`` items are dropped, so ``None`` alone gives ``[]``."""
    text = _BARE_MARKER.sub("", text or "")
    body = text if _MARKER.match(text) else f"{LIST_PREFIX} {text.lstrip()}"
    blocks = re.split(r"\n\s*\n", body)
    kept = [blocks[0]]
    for block in blocks[1:]:
        if not _MARKER.match(block):
            break
        kept.append(block)
    try:
        items = numbered_list("\n".join(kept))
    except ParseError:
        if _NONE.match(text.strip() or "x"):
            return {"events": []}
        raise
    events = list(dict.fromkeys(item for item in items if not _NONE.match(item)))
    return {"events": events}


def render(events: Sequence[str]) -> str:
    """A timeline as the numbered list the prompts show."""
    return "\n".join(f"{i}. {e}" for i, e in enumerate(events, 1))


def retention(previous: Sequence[str], new: Sequence[str]) -> float:
    """The share of previous items found verbatim (after strip) in the new answer."""
    if not previous:
        return 1.0
    kept = {e.strip() for e in new}
    return sum(e.strip() in kept for e in previous) / len(previous)


def needs_merge(previous: Sequence[str], new: Sequence[str]) -> bool:
    """The merge fallback fires when a round dropped or rewrote more than 20% of the items."""
    return retention(previous, new) < MERGE_RETENTION


def is_permutation(before: Sequence[str], after: Sequence[str]) -> bool:
    """The adjusted timeline holds exactly the items of the input (after strip), reordered."""
    return Counter(e.strip() for e in before) == Counter(e.strip() for e in after)


def first_parseable(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of one request's samples (stage output rows), the first that parsed to a non-empty
    timeline; else the first one, whose error explains the failure."""
    ordered = sorted(samples, key=lambda r: r["sample_index"])
    for row in ordered:
        if row["parse_ok"] and row["events"]:
            return row
    return ordered[0]
