"""Current Events Portal day pages → events (udfs.wcep): the layouts, the real rendered pages,
and the promise that wikitext and HTML of the same day give the same rows."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime
from pathlib import Path

import lxml.html
import pytest

from udfs import wcep, wcep_html
from udfs.wcep import Bullet, Citation, DayCapture, DayPageError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wcep"
# wikitext fixture → the portal day whose rendered page in the real sample holds the same events
LAYOUT_FIXTURES = {
    "template_2025_September_20.wikitext": ("template", date(2025, 9, 20)),
    "sandwich_2026_June_13.wikitext": ("sandwich", date(2026, 6, 13)),
    "header_table_2026_March_28.wikitext": ("header_table", date(2026, 3, 28)),
}


@pytest.fixture(scope="module")
def html_days(shared_data) -> dict[str, dict]:
    path = shared_data / "wcep" / "wcep_portal_daily_html_2025-09_2026-08.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {row["date"]: row for row in rows}


@pytest.fixture(scope="module")
def feed_items(shared_data) -> list[tuple[str, str]]:
    root = ET.parse(shared_data / "wcep" / "wp_current_events_2026-08.rss").getroot()
    return [(item.findtext("title"), item.findtext("description")) for item in root.iter("item")]


def expected_leaves(page_html: str) -> tuple[int, int]:
    """(event bullets, event bullets nested under a story) counted straight from the HTML."""
    content = lxml.html.fromstring(page_html).xpath('//div[contains(@class, "current-events-content")]')[0]
    leaves = [li for li in content.xpath(".//li[not(ul) and not(ol)]") if li.text_content().strip()]
    return len(leaves), sum(bool(li.xpath("ancestor::li")) for li in leaves)


# ---------------------------------------------------------------- dates


def test_day_titles():
    assert wcep.is_day_title("Portal:Current events/2026 June 13")
    assert not wcep.is_day_title("Portal:Current events/June 2026")
    assert not wcep.is_day_title("Current events/2026 June 13")
    assert wcep.date_of_day_title("Portal:Current events/2005 January 3") == date(2005, 1, 3)
    assert wcep.day_title(date(2026, 6, 3)) == "Portal:Current events/2026 June 3"
    for bad in ("Portal:Current events/2026 February 30", "Portal:Current events/2026 Juin 3"):
        with pytest.raises(DayPageError) as err:
            wcep.date_of_day_title(bad)
        assert err.value.reason == "bad_date"


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("Current Events - August 14, 2026", date(2026, 8, 14)),
        ("https://en.wikipedia.org/wiki/Portal:Current_events/2026_August_14", date(2026, 8, 14)),
        ("Current Events - Smarch 14, 2026", None),
        ("Current Events - February 30, 2026", None),
        (None, None),
    ],
)
def test_date_of_reference(text, day):
    assert wcep.date_of_reference(text) == day


def test_parse_capture_time():
    assert wcep.parse_capture_time("Sat, 22 Aug 2026 12:16:56 -0000") == datetime(
        2026, 8, 22, 12, 16, 56, tzinfo=UTC
    )
    assert wcep.parse_capture_time("2026-08-22T12:16:58+00:00") == datetime(
        2026, 8, 22, 12, 16, 58, tzinfo=UTC
    )
    assert wcep.parse_capture_time("yesterday") is None
    assert wcep.parse_capture_time(None) is None


# ---------------------------------------------------------------- citations and text


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("(Al Jazeera)", "Al Jazeera"),
        ("(AFP via The Daily Star)", "AFP via The Daily Star"),
        ("(TVP World", "TVP World"),
        ("democrata.es", "democrata.es"),
        ("(Reuters (UK))", "Reuters (UK)"),
        ("[1]", ""),
        ("", ""),
    ],
)
def test_source_name(label, name):
    assert wcep.source_name(label) == name


def cite(label: str, url: str = "https://example.org/a") -> Citation:
    return Citation(url, label)


@pytest.mark.parametrize(
    ("segments", "text", "names"),
    [
        # the period before a trailing citation ends the sentence (regression: it was dropped)
        (
            ["Nazi collaborator from ", "OUN/UPA", ". ", cite("(TVP World"), ", ", cite("democrata.es"), ")"],
            "Nazi collaborator from OUN/UPA.",
            ["TVP World", "democrata.es"],
        ),
        # text after the last citation is residue
        (["the Gaza war. ", cite("(Al Jazeera)"), "."], "the Gaza war.", ["Al Jazeera"]),
        (["a minor.", cite("(Milenio)"), " {", cite("(Noroeste)")], "a minor.", ["Milenio", "Noroeste"]),
        # a parenthesised citation inside the text is still a citation; the text goes on
        (
            ["released in Caracas. ", cite("(AP)"), " Several hours later he is kidnapped."],
            "released in Caracas. Several hours later he is kidnapped.",
            ["AP"],
        ),
        # an external link inside a sentence is text
        (
            ["publishes ", cite("a report"), ' that "finds" it. ', cite("(UN News)")],
            'publishes a report that "finds" it.',
            ["UN News"],
        ),
        # [url Source] at the end of an item, and an unlabelled [url]
        (["Oli is arrested. ", cite("BBC"), " ", cite("")], "Oli is arrested.", ["BBC", ""]),
    ],
)
def test_assemble(segments, text, names):
    got_text, urls, got_names = wcep.assemble(segments)
    assert got_text == text
    assert got_names == names
    assert len(urls) == len(names)


def bullet(
    depth: int, text: str, category: str | None = "Sports", sources: int = 1, link: str = ""
) -> Bullet:
    segments = (text, *[cite(f"(S{i})", f"https://s{i}.example/{text[:5]}") for i in range(sources)])
    return Bullet(depth, category, segments, (link,) if link else ())


def test_build_events_story_paths():
    events = wcep.build_events(
        [
            bullet(1, "War", sources=0, link="War"),
            bullet(2, "Front", sources=0, link="Front (2026)"),
            bullet(3, "Event one."),
            bullet(2, "Event two."),
            bullet(1, "Event three."),
            bullet(1, "Story with its own source", link="Story"),
            bullet(2, "Event four."),
            bullet(1, "", sources=0),
            bullet(1, "Event five.", category="Law and crime"),
        ]
    )
    assert [(e.position, e.text, e.story_path, e.story_links, e.category) for e in events] == [
        (0, "Event one.", ("War", "Front"), ("War", "Front (2026)"), "Sports"),
        (1, "Event two.", ("War",), ("War",), "Sports"),
        (2, "Event three.", (), (), "Sports"),
        (3, "Story with its own source", (), (), "Sports"),
        (4, "Event four.", ("Story with its own source",), ("Story",), "Sports"),
        (5, "Event five.", (), (), "Law and crime"),
    ]


def test_a_category_heading_closes_open_stories():
    events = wcep.build_events(
        [bullet(1, "War", sources=0), bullet(2, "A."), bullet(2, "B.", category="Other")]
    )
    assert [e.story_path for e in events] == [("War",), ()]


def test_event_rows_have_stable_ids():
    events = wcep.build_events([bullet(1, "Same text.")])
    first = wcep.event_rows(date(2026, 1, 2), events, "html")
    again = wcep.event_rows(date(2026, 1, 2), events, "wikitext")
    assert first[0]["event_id"] == again[0]["event_id"]
    assert first[0]["page_title"] == "Portal:Current events/2026 January 2"
    assert wcep.event_rows(date(2026, 1, 3), events, "html")[0]["event_id"] != first[0]["event_id"]


# ---------------------------------------------------------------- wikitext layouts


@pytest.mark.parametrize("name", sorted(LAYOUT_FIXTURES))
def test_each_layout_fixture_is_recognised(name):
    layout, day = LAYOUT_FIXTURES[name]
    got_day, got_layout, events = wcep.parse_wikitext_day(wcep.day_title(day), (FIXTURES / name).read_text())
    assert (got_day, got_layout) == (day, layout)
    assert events and all(e.category and e.source_urls and e.text for e in events)
    assert any(len(e.story_path) >= 2 for e in events)


@pytest.mark.parametrize("name", sorted(LAYOUT_FIXTURES))
def test_wikitext_layout_gives_the_same_rows_as_the_rendered_page(name, html_days):
    _, day = LAYOUT_FIXTURES[name]
    _, _, from_wikitext = wcep.parse_wikitext_day(wcep.day_title(day), (FIXTURES / name).read_text())
    _, from_html = wcep_html.parse_html_day(html_days[day.isoformat()]["html"], day, None)
    wikitext_rows = wcep.event_rows(day, from_wikitext, "wikitext")
    html_rows = wcep.event_rows(day, from_html, "wikitext")
    assert len(wikitext_rows) == len(html_rows) >= 4
    for left, right in zip(wikitext_rows, html_rows, strict=True):
        assert left == right


def test_only_text_between_the_markers_counts():
    text = (
        "{{Current events|year=2026|month=1|day=2|content=\n"
        "* Above the markers, ignored. [https://x.example/0 (X)]\n"
        "<!-- All news items below this line -->\n"
        "<!-- an editor's comment\n* not an item\n-->\n"
        ";Sports\n"
        "* An event. [https://x.example/1 (X)]\n"
        "<!-- All news items above this line -->\n"
        "* Below the markers, ignored. [https://x.example/2 (X)]}}"
    )
    _, layout, events = wcep.parse_wikitext_day("Portal:Current events/2026 January 2", text)
    assert layout == "template"
    assert [(e.category, e.text, e.source_urls) for e in events] == [
        ("Sports", "An event.", ("https://x.example/1",))
    ]


@pytest.mark.parametrize(
    ("wikitext", "reason"),
    [
        ("Nothing but prose.\n* A bullet [https://x.example (X)]", "unknown_layout"),
        (
            "{{Current events|year=2026|month=1|day=2|top=yes}}\n* An event [https://x.example (X)]",
            "unknown_layout",
        ),
        ("{{Current events|year=2026|month=1|day=2|content=\n'''Sports'''\n}}", "no_events"),
        ("", "unknown_layout"),
    ],
)
def test_day_pages_without_events_raise_with_a_reason(wikitext, reason):
    with pytest.raises(DayPageError) as err:
        wcep.parse_wikitext_day("Portal:Current events/2026 January 2", wikitext)
    assert err.value.reason == reason


# ---------------------------------------------------------------- rendered HTML


def test_every_real_html_day_yields_events_with_categories_stories_and_sources(html_days):
    assert len(html_days) == 285
    unsourced = []
    for day_iso, row in html_days.items():
        day, events = wcep_html.parse_html_day(row["html"], date.fromisoformat(day_iso), row["title"])
        assert day.isoformat() == day_iso
        leaves, nested = expected_leaves(row["html"])
        assert len(events) == leaves, day_iso
        assert sum(bool(e.story_path) for e in events) == nested, day_iso
        assert all(e.category for e in events), day_iso
        assert all(len(e.story_path) == len(e.story_links) for e in events)
        assert all(len(e.source_urls) == len(e.source_names) for e in events)
        assert all(u.startswith(("http://", "https://")) for e in events for u in e.source_urls)
        unsourced += [(day_iso, e.text[:30]) for e in events if not e.source_urls]
    # the one real bullet that cites nothing
    assert unsourced == [("2026-03-08", "India wins the 2026 Men's T20 ")]


def test_every_feed_item_yields_the_same_events_as_the_archived_page(feed_items, html_days):
    assert len(feed_items) == 15
    for title, description in feed_items:
        day, events = wcep_html.parse_html_day(description, None, title)
        assert events, title
        assert title.endswith(f"{day:%B} {day:%d}, {day.year}")
        _, archived = wcep_html.parse_html_day(html_days[day.isoformat()]["html"], day, None)
        assert events == archived


def test_html_details(html_days):
    _, events = wcep_html.parse_html_day(html_days["2025-10-13"]["html"], date(2025, 10, 13), None)
    rail = next(e for e in events if "two trains collide" in e.text)
    # a red link with an {{ill}} language note: the story is named and linked without the note
    assert rail.story_path == ("Jablonov nad Turňou rail collision",)
    assert rail.story_links == ("Jablonov nad Turňou rail collision",)
    _, events = wcep_html.parse_html_day(html_days["2026-07-03"]["html"], date(2026, 7, 3), None)
    messi = next(e for e in events if "Messi" in e.text)
    assert messi.source_names == ("AP", "ESPN", "")  # the last is a bare numbered link [1]
    assert messi.text.endswith("one of the greatest FIFA World Cup ever.")


@pytest.mark.parametrize(
    ("page", "hint", "reason"),
    [
        ("", date(2026, 1, 2), "empty_page"),
        ("<div><p>No portal box.</p></div>", date(2026, 1, 2), "unknown_layout"),
        ('<div class="current-events-content"><p><b>Sports</b></p></div>', date(2026, 1, 2), "no_events"),
        (
            '<div class="current-events-content"><ul><li>A. <a class="external" href="https://x">(X)</a></li></ul></div>',
            None,
            "no_date",
        ),
        (
            '<span class="dtstart">2026-01-01</span><div class="current-events-content"><ul><li>A.</li></ul></div>',
            date(2026, 1, 2),
            "date_mismatch",
        ),
    ],
)
def test_html_day_pages_without_events_raise_with_a_reason(page, hint, reason):
    with pytest.raises(DayPageError) as err:
        wcep_html.parse_html_day(page, hint, "no date in here")
    assert err.value.reason == reason


# ---------------------------------------------------------------- one copy per day


def test_pick_latest_keeps_the_latest_capture_per_day():
    d1, d2 = date(2026, 8, 8), date(2026, 8, 9)
    old = DayCapture(d1, "jsonl", "a", datetime(2026, 8, 8, 7, tzinfo=UTC))
    new = DayCapture(d1, "dump", "b", datetime(2026, 8, 9, 7, tzinfo=UTC))
    undated = DayCapture(d1, "zzz", "c", None)
    tie_a = DayCapture(d2, "a_feed", "x", datetime(2026, 8, 9, 12, tzinfo=UTC))
    tie_b = DayCapture(d2, "b_feed", "y", datetime(2026, 8, 9, 12, tzinfo=UTC))
    kept, dropped = wcep.pick_latest([old, undated, new, tie_a, tie_b])
    assert kept == [new, tie_b]
    assert sorted(dropped, key=lambda pair: pair[0].item) == [(old, new), (undated, new), (tie_a, tie_b)]


def test_pick_latest_compares_undated_and_naive_captures():
    # regression: Spark collects naive datetimes; comparing one with the aware stand-in used for
    # an undated copy raised TypeError
    undated = DayCapture(date(2026, 8, 8), "a", "x", None)
    naive = DayCapture(date(2026, 8, 8), "b", "y", datetime(2026, 8, 8, 12))
    kept, dropped = wcep.pick_latest([undated, naive])
    assert kept == [naive] and dropped == [(undated, naive)]
