"""Complex events from the Current Events Portal: events grouped by story, one document each.

An event whose story path is ``[A, B, C]`` joins the complex events keyed ``A``, ``A|B`` and
``A|B|C`` (every prefix, as in the released code), so a parent story also collects its child
stories' events; an event without a story becomes a singleton keyed by its own text. Each event
contributes one document: the first cited URL found in the articles corpus (joined on
``norm_url``; English, more than 100 words), else the event text itself as a *fallback*.
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from udfs.ids import stable_id
from udfs.urls import norm_url

KEY_SEPARATOR = "|"
WCEP_HEADINGS = (
    "Armed conflicts and attacks",
    "Arts and culture",
    "Business and economy",
    "Disasters and accidents",
    "Health and environment",
    "International relations",
    "Law and crime",
    "Politics and elections",
    "Science and technology",
    "Sports",
)
MIN_ARTICLE_WORDS = 100  # an article must have more words than this to serve as a document


def canonical_heading(raw: str | None) -> str | None:
    """One of the ten WCEP headings for a heading as written on the portal (case and small typos
    such as "Business and econony" folded); other headings are kept as written."""
    if not raw or not raw.strip():
        return None
    text = " ".join(raw.split())
    by_lower = {h.lower(): h for h in WCEP_HEADINGS}
    if text.lower() in by_lower:
        return by_lower[text.lower()]
    close = difflib.get_close_matches(text.lower(), list(by_lower), n=1, cutoff=0.9)
    return by_lower[close[0]] if close else text


def story_keys(event: Mapping[str, Any]) -> list[str]:
    """The keys of the complex events an event joins: every prefix of its story path, or its own
    text when it has no story."""
    path = [p.strip() for p in event["story_path"] or () if p and p.strip()]
    if not path:
        return [" ".join(event["text"].split())]
    return [KEY_SEPARATOR.join(path[: i + 1]) for i in range(len(path))]


def group_by_story(events: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Story key → its events, each group sorted by portal day, then position within the day."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        for key in story_keys(event):
            groups.setdefault(key, []).append(event)
    for members in groups.values():
        members.sort(key=lambda e: (e["date"], e["position"]))
    return groups


def is_singleton(events: Sequence[Mapping[str, Any]]) -> bool:
    """The group was keyed by an event's own text (its events have no story)."""
    return not any(p for p in events[0]["story_path"] or ())


def article_index(articles: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Articles by canonical URL (the articles' ``canonical_url`` is already ``norm_url``-ed)."""
    index: dict[str, list[Mapping[str, Any]]] = {}
    for a in articles:
        index.setdefault(a["canonical_url"], []).append(a)
    return index


def usable_article(article: Mapping[str, Any]) -> bool:
    return article.get("language") == "en" and len((article.get("text") or "").split()) > MIN_ARTICLE_WORDS


def lookup_document(
    event: Mapping[str, Any], articles: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """The document of one event: the first cited URL with a usable article, else the fallback."""
    for url in event["source_urls"] or ():
        for article in articles.get(norm_url(url) or "", ()):
            if usable_article(article):
                return {
                    "event_id": event["event_id"],
                    "date": event["date"],
                    "position": event["position"],
                    "title": article.get("title") or event["text"],
                    "text": article["text"],
                    "url": article["canonical_url"],
                    "article_id": article["article_id"],
                    "is_fallback": False,
                    "event_text": event["text"],
                }
    return {
        "event_id": event["event_id"],
        "date": event["date"],
        "position": event["position"],
        "title": event["text"],
        "text": event["text"] or "Unknown",
        "url": (event["source_urls"] or [None])[0],
        "article_id": None,
        "is_fallback": True,
        "event_text": event["text"],
    }


@dataclass
class StoryCE:
    """One WCEP complex event after document lookup, with what was left out and why."""

    ce_id: str
    key: str
    title: str
    category: str | None
    ce_date: dt.date | None
    n_events: int
    docs: list[dict[str, Any]]
    dropped_docs: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    reject_reason: str | None = None


def assemble(
    key: str,
    events: Sequence[Mapping[str, Any]],
    articles: Mapping[str, Sequence[Mapping[str, Any]]],
    max_docs: int,
    min_events: int = 1,
) -> StoryCE:
    """Build one complex event from its (sorted) events.

    Exact-duplicate event texts keep their first occurrence; two events citing the same article
    give one document; the first ``max_docs`` documents in time order are kept. The CE is
    rejected (``reject_reason``) when it has fewer than ``min_events`` distinct events or when
    it is a singleton whose only document is a fallback. Title: the last story name of the key;
    category: the most frequent heading among the kept documents' events; date: the day of the
    last kept document.
    """
    seen_text: set[str] = set()
    seen_article: set[str] = set()
    docs: list[dict[str, Any]] = []
    dropped: list[tuple[dict[str, Any], str]] = []
    headings: dict[str, str | None] = {}
    distinct = 0
    for event in events:
        text = " ".join(event["text"].split())
        if text in seen_text:
            dropped.append((lookup_document(event, {}), "duplicate_event"))
            continue
        seen_text.add(text)
        distinct += 1
        doc = lookup_document(event, articles)
        if doc["article_id"] and doc["article_id"] in seen_article:
            dropped.append((doc, "duplicate_article"))
            continue
        if doc["article_id"]:
            seen_article.add(doc["article_id"])
        if len(docs) >= max_docs:
            dropped.append((doc, "beyond_max_docs"))
            continue
        headings[doc["event_id"]] = canonical_heading(event["category"])
        docs.append(doc)
    for seq, doc in enumerate(docs):
        doc["seq"] = seq
    counts = Counter(h for h in headings.values() if h)
    order = {h: i for i, h in enumerate(headings.values())}
    category = min(counts, key=lambda h: (-counts[h], order[h])) if counts else None
    ce = StoryCE(
        ce_id=stable_id("wcep", key),
        key=key,
        title=key.split(KEY_SEPARATOR)[-1],
        category=category,
        ce_date=docs[-1]["date"] if docs else None,
        n_events=distinct,
        docs=docs,
        dropped_docs=dropped,
    )
    if distinct < min_events:
        ce.reject_reason = "too_few_events"
    elif is_singleton(events) and all(d["is_fallback"] for d in docs):
        ce.reject_reason = "singleton_fallback"
    return ce
