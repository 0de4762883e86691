"""Scoring extracted articles against hand-labelled pages: title exact match, title token F1,
same-UTC-day publish date and body token F1.

A label names a page by its WARC file and record offset and gives its title and publish day as
a reader sees them. The reference body is not stored: ``body_xpath`` selects the page's own
article paragraphs, and their text (scripts and styles removed) is the reference. Token F1 is the
F1 of the two bags of lower-cased word tokens (``\\w+``), so word order and layout do not count.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Any

from lxml import etree

_WORD = re.compile(r"\w+")
FIELDS = ("title_exact", "title_f1", "date", "body_f1")


@dataclass(frozen=True)
class Label:
    """One hand-labelled page."""

    warc: str
    offset: int
    url: str
    title: str
    published_date: str  # YYYY-MM-DD, UTC
    body_xpath: str

    @classmethod
    def of(cls, data: dict[str, Any]) -> Label:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def tokens(text: str | None) -> Counter:
    return Counter(_WORD.findall((text or "").lower()))


def token_f1(predicted: str | None, reference: str | None) -> float:
    """Bag-of-words F1 of lower-cased word tokens (1.0 when both are empty)."""
    p, r = tokens(predicted), tokens(reference)
    if not p and not r:
        return 1.0
    overlap = sum((p & r).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(p.values()), overlap / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def same_title(predicted: str | None, reference: str) -> bool:
    """Exact match after Unicode compatibility normalisation and whitespace collapsing."""

    def norm(value: str) -> str:
        return " ".join(unicodedata.normalize("NFKC", value).split())

    return predicted is not None and norm(predicted) == norm(reference)


def reference_body(doc: etree._Element, xpath: str) -> str:
    """The text of the elements ``xpath`` selects in a copy of ``doc``, one line each, without
    scripts and styles."""
    doc = copy.deepcopy(doc)
    etree.strip_elements(doc, "script", "style", "noscript", with_tail=False)
    return "\n".join(" ".join("".join(el.itertext()).split()) for el in doc.xpath(xpath))


def score(row: dict[str, Any], label: Label, reference: str) -> dict[str, float]:
    """The four scores of one extracted row (an article row, or a rejected one: all zero but a
    matching empty body) against its label."""
    published = row.get("published_date")
    return {
        "title_exact": float(same_title(row.get("title"), label.title)),
        "title_f1": token_f1(row.get("title"), label.title),
        "date": float(published is not None and published.isoformat() == label.published_date),
        "body_f1": token_f1(row.get("text"), reference),
    }


def mean_scores(scores: list[dict[str, float]]) -> dict[str, float]:
    return {f: sum(s[f] for s in scores) / len(scores) for f in FIELDS} if scores else {}
