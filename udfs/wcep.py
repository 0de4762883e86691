"""Wikipedia Current Events Portal day pages → one event per bullet, from wikitext or rendered HTML.

Both forms are first reduced to the same flat list of ``Bullet`` (depth, category heading, inline
segments, link targets); ``build_events`` then turns bullets into events. So a day page gives the
same events, story paths and sources whether it came from a dump or from the rendered site
(the rendered form is read by ``udfs.wcep_html``).

A bullet with deeper bullets under it is a story (its text joins the story path of everything
below it); a bullet without is an event. External links are citations when their label is
parenthesised or bracketed (``(Al Jazeera)``, ``[1]``) or when only punctuation and other
citations follow them (``[url Source]`` at the end of an item); an external link inside a
sentence stays part of the text. Nothing here imports Spark.
"""

from __future__ import annotations

import calendar
import email.utils
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from urllib.parse import unquote

import mwparserfromhell
from mwparserfromhell.nodes import ExternalLink

from udfs.ids import stable_id
from udfs.wikitext import PlainText, one_line, parse_timestamp

MONTHS = {name: number for number, name in enumerate(calendar.month_name) if name}
_DAY_TITLE = re.compile(r"^Portal:Current events/(\d{4}) ([A-Za-z]+) (\d{1,2})$")
_FEED_DAY = re.compile(r"\b([A-Z][a-z]+) (\d{1,2}), (\d{4})\b")  # "Current Events - August 14, 2026"
_MARK_BELOW = re.compile(r"<!--\s*All news items below this line\s*-->", re.IGNORECASE)
_MARK_ABOVE = re.compile(r"<!--\s*All news items above this line\s*-->", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SANDWICH_TOP = re.compile(r"\{\{\s*Current events\s*\|[^{}]*?\btop\s*=\s*yes\b[^{}]*\}\}", re.IGNORECASE)
_SANDWICH_BOTTOM = re.compile(
    r"\{\{\s*Current events\s*\|[^{}]*?\bbottom\s*=\s*yes\b[^{}]*\}\}", re.IGNORECASE
)
_HEADER = re.compile(r"\{\{\s*Current events header\s*(?:\|[^{}]*)?\}\}", re.IGNORECASE)
_BULLET = re.compile(r"^(\*+)\s*(.*)$")
_BOLD_LINE = re.compile(r"^'''(.+?)'''$")
_TERM_LINE = re.compile(r"^;\s*(.+)$")
_WORD = re.compile(r"\w")
_NUMBERED_LINK = re.compile(r"\[\d+\]")


class DayPageError(ValueError):
    """A day page that yields no events; ``reason`` becomes the rejected row's reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Citation:
    """An external link inside a bullet: ``url`` and its visible label."""

    url: str
    label: str


@dataclass(frozen=True)
class Bullet:
    """One list item of a day page, its own content only (nested items are separate bullets)."""

    depth: int
    category: str | None
    segments: tuple[str | Citation, ...]
    links: tuple[str, ...]  # normalised wiki titles linked from the item, in order


@dataclass(frozen=True)
class Event:
    position: int
    category: str | None
    story_path: tuple[str, ...]
    story_links: tuple[str, ...]
    text: str
    source_urls: tuple[str, ...]
    source_names: tuple[str, ...]


# ---------------------------------------------------------------- dates and titles


def is_day_title(title: str | None) -> bool:
    """True for ``Portal:Current events/<YYYY> <Month> <D>`` (the day pages, not month archives)."""
    return bool(title and _DAY_TITLE.match(title))


def day_title(day: date) -> str:
    """The portal page title of a day, the ``page_title`` of every event from either format."""
    return f"Portal:Current events/{day.year} {calendar.month_name[day.month]} {day.day}"


def date_of_day_title(title: str) -> date:
    match = _DAY_TITLE.match(title)
    if not match or match.group(2) not in MONTHS:
        raise DayPageError("bad_date", f"not a day page title: {title!r}")
    try:
        return date(int(match.group(1)), MONTHS[match.group(2)], int(match.group(3)))
    except ValueError as exc:
        raise DayPageError("bad_date", f"{title!r}: {exc}") from exc


def parse_capture_time(value: str | None) -> datetime | None:
    """When a copy of a day page was captured: an RFC 822 feed date (``Sat, 22 Aug 2026
    12:16:56 -0000``) or an ISO 8601 time, as aware UTC; None when absent or unreadable."""
    if not value or not value.strip():
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return parse_timestamp(value)
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def date_of_reference(text: str | None) -> date | None:
    """The day named by a feed title (``Current Events - August 14, 2026``) or a portal link
    (``…/Portal:Current_events/2026_August_14``); None when it names none."""
    if not text:
        return None
    text = unquote(text).replace("_", " ")
    tail = text[text.find("Portal:Current events/") :] if "Portal:Current events/" in text else ""
    if is_day_title(tail):
        try:
            return date_of_day_title(tail)
        except DayPageError:
            return None
    match = _FEED_DAY.search(text)
    if not match or match.group(1) not in MONTHS:
        return None
    try:
        return date(int(match.group(3)), MONTHS[match.group(1)], int(match.group(2)))
    except ValueError:
        return None


# ---------------------------------------------------------------- bullets → events


def source_name(label: str) -> str:
    """``(Al Jazeera)`` → ``Al Jazeera``; the ``[1]`` of an unlabelled link → ``""``."""
    name = one_line(label)
    if _NUMBERED_LINK.fullmatch(name):
        return ""
    name = name.removeprefix("(")
    if name.endswith(")") and name.count(")") > name.count("("):
        name = name[:-1]
    return name.strip()


def _labelled_as_citation(label: str) -> bool:
    label = label.strip()
    return not label or label[0] in "([" or label[-1] in ")]"


def assemble(segments: Sequence[str | Citation]) -> tuple[str, list[str], list[str]]:
    """Plain text without citations, and the cited URLs with their source names.

    Once the words are over, text that follows a citation (the ``.`` of ``(AP).``, the ``,``
    between two citations) is residue of the citations and is dropped with them; punctuation
    before the first trailing citation ends the sentence and stays.
    """
    citation = [False] * len(segments)
    trailing = True
    last_word = -1
    for i in range(len(segments) - 1, -1, -1):
        seg = segments[i]
        if isinstance(seg, Citation):
            citation[i] = trailing or _labelled_as_citation(seg.label)
            trailing = trailing and citation[i]
        elif _WORD.search(seg):
            trailing = False
        if not trailing and last_word < 0:
            last_word = i
    parts: list[str] = []
    urls: list[str] = []
    names: list[str] = []
    in_residue = False
    for i, seg in enumerate(segments):
        if isinstance(seg, Citation):
            if citation[i]:
                urls.append(seg.url)
                names.append(source_name(seg.label))
                in_residue = i > last_word
            else:
                parts.append(seg.label)
        elif not in_residue:
            parts.append(seg)
    return one_line("".join(parts)), urls, names


def build_events(bullets: Sequence[Bullet]) -> list[Event]:
    """Walk the bullets in page order keeping the chain of open stories.

    A bullet followed by a deeper one is a story; it becomes an event too only if it cites
    sources itself. A category heading closes every open story. Bullets without text are skipped.
    """
    events: list[Event] = []
    stories: list[tuple[int, str, str]] = []  # (depth, name, link)
    category: str | None = None
    for i, bullet in enumerate(bullets):
        if bullet.category != category:
            stories, category = [], bullet.category
        while stories and stories[-1][0] >= bullet.depth:
            stories.pop()
        text, urls, names = assemble(bullet.segments)
        following = bullets[i + 1] if i + 1 < len(bullets) else None
        is_story = following is not None and following.category == category and following.depth > bullet.depth
        if text and (urls or not is_story):
            events.append(
                Event(
                    position=len(events),
                    category=category,
                    story_path=tuple(s[1] for s in stories),
                    story_links=tuple(s[2] for s in stories),
                    text=text,
                    source_urls=tuple(urls),
                    source_names=tuple(names),
                )
            )
        if is_story and text:
            stories.append((bullet.depth, text, bullet.links[0] if bullet.links else ""))
    return events


def event_rows(day: date, events: Iterable[Event], source_format: str) -> list[dict]:
    """Rows of ``udfs.schemas.WCEP_EVENTS``; ``event_id`` hashes day, position and text."""
    page_title = day_title(day)
    return [
        {
            "event_id": stable_id(day.isoformat(), e.position, e.text),
            "position": e.position,
            "category": e.category,
            "story_path": list(e.story_path),
            "story_links": list(e.story_links),
            "text": e.text,
            "source_urls": list(e.source_urls),
            "source_names": list(e.source_names),
            "source_format": source_format,
            "page_title": page_title,
            "date": day,
        }
        for e in events
    ]


# ---------------------------------------------------------------- wikitext


def wikitext_body(wikitext: str) -> tuple[str, str]:
    """The layout of a day page and the wikitext that holds its items.

    Layouts: ``sandwich`` (``{{Current events|…|top=yes}}`` … ``{{Current events|bottom=yes}}``,
    since mid-2026), ``template`` (``{{Current events|…|content=…}}``), ``header_table`` (early
    2005: ``{{Current events header|…}}`` then a table). Within it, only the text between the
    ``All news items below/above this line`` markers counts when the markers are there.
    """
    top = _SANDWICH_TOP.search(wikitext)
    if top:
        bottom = _SANDWICH_BOTTOM.search(wikitext, top.end())
        if bottom is None:
            raise DayPageError("unknown_layout", "top=yes without a closing bottom=yes template")
        return "sandwich", _between_markers(wikitext[top.end() : bottom.start()])
    for template in mwparserfromhell.parse(wikitext).filter_templates(recursive=False):
        if " ".join(str(template.name).split()).lower() == "current events" and template.has("content"):
            return "template", _between_markers(str(template.get("content").value))
    header = _HEADER.search(wikitext)
    if header:
        return "header_table", _between_markers(wikitext[header.end() :])
    raise DayPageError("unknown_layout", one_line(wikitext)[:200])


def _between_markers(body: str) -> str:
    below = _MARK_BELOW.search(body)
    start = below.end() if below else 0
    above = _MARK_ABOVE.search(body, start)
    return _COMMENT.sub("", body[start : above.start() if above else len(body)])


def _wikitext_heading(line: str) -> str | None:
    match = _BOLD_LINE.match(line) or _TERM_LINE.match(line)
    if not match:
        return None
    return one_line(PlainText().render(mwparserfromhell.parse(match.group(1)))) or None


def _wikitext_bullet(depth: int, category: str | None, content: str) -> Bullet:
    renderer = PlainText()
    segments: list[str | Citation] = []
    for node in mwparserfromhell.parse(content).nodes:
        if isinstance(node, ExternalLink):
            label = PlainText().render(node.title) if node.title is not None else ""
            segments.append(Citation(str(node.url).strip(), label))
        else:
            segments.append(renderer.node(node))
    return Bullet(depth, category, tuple(segments), tuple(renderer.links))


def wikitext_bullets(body: str) -> list[Bullet]:
    """Bullets of the item area: ``*``/``**``/``***`` lines under ``'''Category'''`` or
    ``;Category`` headings; table markup lines of the 2005 layout are skipped."""
    bullets: list[Bullet] = []
    category: str | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith(("{|", "|}", "|-", "!")):
            continue
        line = line.removeprefix("|").strip()
        match = _BULLET.match(line)
        if match:
            bullets.append(_wikitext_bullet(len(match.group(1)), category, match.group(2)))
            continue
        heading = _wikitext_heading(line)
        if heading:
            category = heading
    return bullets


def parse_wikitext_day(title: str, wikitext: str | None) -> tuple[date, str, list[Event]]:
    """Date, layout and events of a day page from a dump; raises ``DayPageError``."""
    day = date_of_day_title(title)
    layout, body = wikitext_body(wikitext or "")
    events = build_events(wikitext_bullets(body))
    if not events:
        raise DayPageError("no_events", f"{layout} layout with no event bullets")
    return day, layout, events


# ---------------------------------------------------------------- one page per day


@dataclass(frozen=True)
class DayCapture:
    """One parsed day page: which input it came from and when that copy was captured."""

    day: date
    input: str
    item: str
    captured_at: datetime | None


def _recency(capture: DayCapture) -> tuple[bool, float, str, str]:
    """Sort key: captured copies before uncaptured ones, then by time, input and item. Times are
    compared as POSIX seconds, so aware and naive datetimes (Spark collects naive ones) mix."""
    at = capture.captured_at
    return (at is not None, at.timestamp() if at else 0.0, capture.input, capture.item)


def pick_latest(
    captures: Iterable[DayCapture],
) -> tuple[list[DayCapture], list[tuple[DayCapture, DayCapture]]]:
    """Keep one capture per day, the latest (ties: the input that sorts last); return the kept
    ones and, for every other, the pair (dropped, kept instead)."""
    by_day: dict[date, list[DayCapture]] = {}
    for capture in captures:
        by_day.setdefault(capture.day, []).append(capture)
    kept: list[DayCapture] = []
    dropped: list[tuple[DayCapture, DayCapture]] = []
    for day in sorted(by_day):
        ranked = sorted(by_day[day], key=_recency, reverse=True)
        kept.append(ranked[0])
        dropped += [(c, ranked[0]) for c in ranked[1:]]
    return kept, dropped
