"""Selecting Wikipedia pages that describe events, and the page texts each prompt reads.

The filters run before any model call, on the ``wiki_pages`` columns: article namespace, no
redirect, a minimum length in words, an event-like section title (exact match after strip) and a
category that names a year from 1950 on or contains "event" / "incident". Section lists are the
union of the paper's and the released code's (see ``docs/openforecast.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from udfs.text import first_words

# Section titles that mark a page as event-like: the paper's four plus the released code's list.
EVENT_SECTION_TITLES = frozenset(
    {
        "Background", "Development", "Aftermath", "Reaction",
        "History", "Results", "Schedule", "Overview", "Events", "Plot summary", "Summary",
        "Synopsis", "Records", "Election results", "Timeline", "Schedule and results",
        "Description and history", "List", "Treatment", "Impact", "Battle", "Reactions", "Causes",
        "Major results", "Influence", "Investigation", "Calendar", "Accidents and incidents",
        "Influences", "Incidents", "Storylines", "Result", "Evolution", "Cause", "Effects", "Event",
        "Process", "Incident", "Accident",
    }
)  # fmt: skip
# "List E": sections that tell how an event unfolded ("Introduction" is the lead).
EVOLUTION_SECTIONS = (
    "Background", "Results", "Aftermath", "Events", "Overview", "Summary", "Reactions",
    "Investigation", "Impact", "Timeline", "Event", "Incident", "Accident", "Reaction",
    "Development", "Response", "Effects", "Description", "Causes", "Cause", "Storylines",
    "Incidents", "Consequences", "Responses", "Protests", "Massacre", "Outcome", "Attacks",
)  # fmt: skip
# The date prompt reads list E without Background, plus Battle and Investigations.
DATE_SECTIONS = (*(s for s in EVOLUTION_SECTIONS if s != "Background"), "Battle", "Investigations")
CATEGORY_SECTIONS = ("Background", "Description")
EXCLUDED_SECTIONS = frozenset(
    {
        "References",
        "See also",
        "External links",
        "Notes",
        "Further reading",
        "Electoral system",
        "Bibliography",
    }
)
CATEGORY_LABELS = (
    "People", "Country", "Region", "Organization", "Sports Competition", "Entertainment",
    "item Definition", "Holiday", "Event",
)  # fmt: skip
EVENT_LABEL = "Event"
_EVENT_CATEGORY = re.compile(r"\b(19[5-9]\d|20\d\d)\b")

CATEGORY_INPUT_CHARS = 5000
DATE_INPUT_WORDS = 5000
TIMELINE_INPUT_WORDS = 6000


def base_reject_reason(page: dict[str, Any], min_words: int) -> str | None:
    """Why a page fails the base filter (namespace 0, not a redirect, at least ``min_words``)."""
    if page["ns"] != 0:
        return "not_article"
    if page["is_redirect"]:
        return "redirect"
    if (page["n_words"] or 0) < min_words:
        return "too_short"
    return None


def has_event_category(categories: Iterable[str] | None) -> bool:
    """A category names a year 1950–2099 or contains "event" or "incident" (any case)."""
    return any(
        _EVENT_CATEGORY.search(c) or "event" in c.lower() or "incident" in c.lower() for c in categories or ()
    )


def has_event_section(sections: Iterable[dict[str, Any]] | None) -> bool:
    """Some section title, stripped, is exactly one of ``EVENT_SECTION_TITLES``."""
    return any((s["title"] or "").strip() in EVENT_SECTION_TITLES for s in sections or ())


def _select(sections: Sequence[dict[str, Any]], keep: Any) -> list[dict[str, Any]]:
    """Sections whose heading passes ``keep``; a subsection (a deeper level below a heading)
    follows its heading's decision."""
    chosen: list[dict[str, Any]] = []
    level, taken = 0, False
    for s in sections:
        if not (level and s["level"] > level):
            level, taken = s["level"], bool(keep((s["title"] or "").strip()))
        if taken:
            chosen.append(s)
    return chosen


def _render(lead: str | None, sections: Sequence[dict[str, Any]]) -> str:
    parts = [lead.strip()] if lead and lead.strip() else []
    for s in sections:
        text = (s["text"] or "").strip()
        parts.append(f"{s['title'].strip()}\n{text}" if text else s["title"].strip())
    return "\n\n".join(parts)


def word_count(text: str) -> int:
    return len(text.split())


def classification_text(page: dict[str, Any], max_words: int | None = None) -> str:
    """Lead plus the Background and Description sections, cut to 5,000 characters."""
    sections = _select(page["sections"] or [], lambda t: t in CATEGORY_SECTIONS)
    return first_words(_render(page["lead"], sections)[:CATEGORY_INPUT_CHARS], max_words)


def date_text(page: dict[str, Any], max_words: int | None = None) -> str:
    """Lead plus the sections that date an event, stopped after 5,000 words."""
    sections = _select(page["sections"] or [], lambda t: t in DATE_SECTIONS)
    limit = min(DATE_INPUT_WORDS, max_words) if max_words else DATE_INPUT_WORDS
    return first_words(_render(page["lead"], sections), limit)


def timeline_text(page: dict[str, Any], max_words: int | None = None) -> str:
    """Every section but references and the like; beyond 6,000 words only the lead and list E."""
    sections = page["sections"] or []
    text = _render(page["lead"], _select(sections, lambda t: t not in EXCLUDED_SECTIONS))
    if word_count(text) > TIMELINE_INPUT_WORDS:
        text = _render(page["lead"], _select(sections, lambda t: t in EVOLUTION_SECTIONS))
    return first_words(text, max_words)
