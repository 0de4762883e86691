"""Rendered Current Events Portal day pages (the site's HTML) → the ``Bullet`` list of ``udfs.wcep``,
then events with the same ``build_events`` as the wikitext form; and the day-page records of the
two input kinds (JSON Lines archives, RSS feeds). Nothing here imports Spark."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import date
from typing import IO
from urllib.parse import parse_qs, unquote, urlsplit

import lxml.etree
import lxml.html

from udfs.wcep import Bullet, Citation, DayPageError, Event, build_events, date_of_reference
from udfs.wikitext import normalize_title, one_line

_SKIPPED_HTML_CLASSES = frozenset({"noprint", "reference", "mw-ref"})


def title_from_href(href: str | None) -> str | None:
    """The English Wikipedia page a link points to (``/wiki/X``, ``…/wiki/X``, red links)."""
    if not href:
        return None
    parts = urlsplit(href)
    if parts.netloc not in ("", "en.wikipedia.org"):
        return None
    if parts.path.startswith("/wiki/"):
        return normalize_title(unquote(parts.path[len("/wiki/") :]))
    if parts.path.endswith("/index.php"):
        titles = parse_qs(parts.query).get("title")
        return normalize_title(titles[0]) if titles else None
    return None


def _absolute(href: str) -> str:
    return "https:" + href if href.startswith("//") else href


def _html_inline(element, segments: list[str | Citation], links: list[str]) -> None:
    """Append the segments of one inline element and its tail."""
    if isinstance(element.tag, str):
        classes = set((element.get("class") or "").split())
        if element.tag == "a" and "external" in classes:
            href = _absolute(element.get("href") or "")
            label = element.text_content()
            segments.append(Citation(href, "" if label.strip() == href else label))
        elif element.tag not in ("style", "script") and not classes & _SKIPPED_HTML_CLASSES:
            if element.tag == "a":
                target = title_from_href(element.get("href"))
                if target:
                    links.append(target)
            if element.tag == "br":
                segments.append(" ")
            _html_own_content(element, segments, links)
    segments.append(element.tail or "")


def _html_own_content(element, segments: list[str | Citation], links: list[str]) -> None:
    """Text and inline children of an element, leaving out nested lists."""
    segments.append(element.text or "")
    for child in element:
        if child.tag in ("ul", "ol"):
            segments.append(child.tail or "")
        else:
            _html_inline(child, segments, links)


def _html_list(ul, depth: int, category: str | None, bullets: list[Bullet]) -> None:
    for li in ul.iterchildren("li"):
        segments: list[str | Citation] = []
        links: list[str] = []
        _html_own_content(li, segments, links)
        bullets.append(Bullet(depth, category, tuple(segments), tuple(links)))
        for nested in li.iterchildren("ul", "ol"):
            _html_list(nested, depth + 1, category, bullets)


def _html_heading(element) -> str | None:
    """The category of a ``<p><b>Category</b></p>`` paragraph (or a content-heading div)."""
    text = one_line(element.text_content())
    if "current-events-content-heading" in (element.get("class") or ""):
        return text or None
    bold = element.find("b")
    if element.tag == "p" and bold is not None and one_line(bold.text_content()) == text:
        return text or None
    return None


def html_bullets(html: str) -> tuple[date | None, list[Bullet]]:
    """The date stamped in a rendered day page (``dtstart``) and its bullets."""
    document = lxml.html.fromstring(html)
    contents = document.find_class("current-events-content")
    if not contents:
        raise DayPageError("unknown_layout", "no current-events-content block in the HTML")
    stamp = None
    for element in document.find_class("dtstart"):
        try:
            stamp = date.fromisoformat(element.text_content().strip())
        except ValueError:
            continue
        break
    bullets: list[Bullet] = []
    category: str | None = None
    for content in contents:
        for child in content.iterchildren():
            if child.tag in ("ul", "ol"):
                _html_list(child, 1, category, bullets)
            elif isinstance(child.tag, str):
                category = _html_heading(child) or category
    return stamp, bullets


def parse_html_day(
    html: str | None, date_hint: date | None, reference: str | None
) -> tuple[date, list[Event]]:
    """Date and events of a rendered day page; raises ``DayPageError``.

    The date is the page's own ``dtstart`` stamp, else ``date_hint`` (the input's date field),
    else the day named by ``reference`` (feed title or link). A stamp that contradicts the hint
    is an error rather than a guess.
    """
    if not html or not html.strip():
        raise DayPageError("empty_page", "no HTML")
    stamp, bullets = html_bullets(html)
    if stamp and date_hint and stamp != date_hint:
        raise DayPageError("date_mismatch", f"page says {stamp}, input says {date_hint}")
    day = stamp or date_hint or date_of_reference(reference)
    if day is None:
        raise DayPageError("no_date", f"no date in the page or in {reference!r}")
    events = build_events(bullets)
    if not events:
        raise DayPageError("no_events", f"{len(bullets)} bullets and no event among them")
    return day, events


# ---------------------------------------------------------------- input records

RECORD_KEYS = ("item", "date_hint", "captured", "html", "_corrupt_record")


def _text(value) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def json_day_records(lines: Iterable[bytes]) -> Iterator[dict]:
    """Day-page records of a JSON Lines archive (one object per line: ``date``, ``title``,
    ``html``, capture time ``rss_pubDate`` or ``commit_date``); a line that is no JSON object is
    a record holding only ``_corrupt_record``; blank lines are skipped."""
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            yield dict.fromkeys(RECORD_KEYS) | {
                "_corrupt_record": line.decode("utf-8", "replace").rstrip("\n")
            }
            continue
        yield {
            "item": _text(obj.get("title")),
            "date_hint": _text(obj.get("date")),
            "captured": _text(obj.get("rss_pubDate") or obj.get("commit_date")),
            "html": _text(obj.get("html")),
            "_corrupt_record": None,
        }


def feed_day_records(stream: IO[bytes]) -> Iterator[dict]:
    """Day-page records of an RSS 2.0 feed: each ``<item>`` carries the rendered day page in
    ``description``, its title (or link) and capture time ``pubDate``. Elements are freed as they
    are read, so a long feed is not held whole."""
    for _, element in lxml.etree.iterparse(stream, tag="item", huge_tree=True):
        fields = {child.tag: child.text for child in element if isinstance(child.tag, str)}
        yield {
            "item": fields.get("title") or fields.get("link"),
            "date_hint": None,
            "captured": fields.get("pubDate"),
            "html": fields.get("description"),
            "_corrupt_record": None,
        }
        element.clear()
