"""Wikitext → plain text, sections and categories (udfs.wikitext), on written and real pages."""

from __future__ import annotations

import bz2
import html
import re
from datetime import UTC, datetime

import mwparserfromhell
import pytest

from udfs.wikitext import (
    PlainText,
    drop_unparsed_templates,
    input_stem,
    normalize_title,
    parse_page,
    parse_timestamp,
    tidy,
)


def render(wikitext: str) -> tuple[str, PlainText]:
    renderer = PlainText()
    return tidy(renderer.render(mwparserfromhell.parse(wikitext))), renderer


def dump_pages(path) -> dict[str, tuple[str, str | None]]:
    """title → (wikitext, redirect title) of every page in a bz2 export (a plain regex reader,
    independent of the job's XML path)."""
    with bz2.open(path, "rt", encoding="utf-8") as f:
        xml = f.read()
    pages = {}
    for block in re.findall(r"<page>(.*?)</page>", xml, re.DOTALL):
        title = html.unescape(re.search(r"<title>(.*?)</title>", block).group(1))
        redirect = re.search(r'<redirect title="([^"]*)"', block)
        text = re.search(r"<text[^>]*>(.*?)</text>", block, re.DOTALL)
        pages[title] = (
            html.unescape(text.group(1)) if text else "",
            html.unescape(redirect.group(1)) if redirect else None,
        )
    return pages


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("gaza_war", "Gaza war"),
        ("  Playoff format#Best-of-seven playoff ", "Playoff format"),
        ("Ren & Stimpy", "Ren & Stimpy"),
        ("", None),
        (None, None),
    ],
)
def test_normalize_title(raw, expected):
    assert normalize_title(raw) == expected


def test_links_render_as_their_text_and_are_recorded():
    text, r = render("[[Israel]]i forces enter [[gaza city|the city]] and [[:Category:Wars]].")
    assert text == "Israeli forces enter the city and Category:Wars."
    assert r.links == ["Israel", "Gaza city", "Category:Wars"]
    assert r.categories == []


def test_categories_files_and_interlanguage_links_are_not_text():
    text, r = render(
        "Body [[File:X.jpg|thumb|A caption]] text.\n[[Category:2026 in sports|Key]]\n[[category:Test_pages]]\n[[de:Seite]]"
    )
    assert text == "Body text."
    assert r.categories == ["2026 in sports", "Test pages"]


def test_references_and_unknown_templates_are_dropped_inline_templates_kept():
    text, _ = render(
        "A{{efn|note}} B<ref>cite</ref> {{nowrap|C D}} {{convert|770000|ha}} 1417{{ndash}}1701 "
        "{{lang|de|Berlin}} {{ill|Đức Phúc|vi|Đức Phúc}} Cassini{{'}}s &nbsp;end"
    )
    assert text == "A B C D 770000 ha 1417–1701 Berlin Đức Phúc Cassini's end"


def test_ill_template_is_a_link_to_the_english_title():
    _, r = render("{{ill|Jablonov nad Turňou rail collision|de|Eisenbahnunfall bei Jablonov nad Turňou}}")
    assert r.links == ["Jablonov nad Turňou rail collision"]


def test_tables_render_one_row_per_line():
    text, _ = render('{| class="wikitable"\n! Team !! Total\n|-\n| Louisville || 27\n|-\n| DC || 20\n|}')
    assert text.splitlines() == ["Team | Total", "Louisville | 27", "DC | 20"]


def test_tidy_removes_leftovers_of_dropped_templates():
    assert tidy("Merkel (; ; born 17 July 1954) and Berlin ( , ) is  big.") == (
        "Merkel (born 17 July 1954) and Berlin is big."
    )
    assert tidy("a\n\n\n\n b __NOTOC__") == "a\n\nb"


def test_drop_unparsed_templates_removes_balanced_spans_only():
    assert drop_unparsed_templates("x {{Infobox\n| a = {{b}}\n}} y") == "x  y"
    assert drop_unparsed_templates("keep {{ unbalanced") == "keep {{ unbalanced"


def test_parse_page_splits_lead_and_sections():
    page = parse_page(
        "Lead with [[link]].\n== Background ==\nWhy.\n=== Detail ===\nMore words here.\n"
        "==Aftermath== <!-- note -->\nAfter.\n[[Category:Events]]"
    )
    assert page.lead == "Lead with link."
    assert [(s.level, s.title, s.text) for s in page.sections] == [
        (2, "Background", "Why."),
        (3, "Detail", "More words here."),
        (2, "Aftermath", "After."),
    ]
    assert page.categories == ["Events"]
    assert page.n_words == 3 + 1 + 3 + 1
    assert not page.is_redirect and page.redirect_target is None


def test_page_without_headings_is_all_lead():
    # regression: sections were zipped with one bound too many and raised on heading-less pages
    page = parse_page("Just a stub about a [[thing]].\n[[Category:Stubs]]")
    assert page.lead == "Just a stub about a thing."
    assert page.sections == []
    assert page.n_words == 6


def test_unbalanced_italics_do_not_swallow_later_sections():
    # regression: mwparserfromhell lets an unclosed '' run across headings, which hid every
    # section of "Angela Merkel"; sections are now cut at heading lines before parsing
    page = parse_page("Lead ''unclosed italics.\n== One ==\nFirst.\n== Two ==\nSecond.")
    assert [s.title for s in page.sections] == ["One", "Two"]
    assert page.sections[1].text == "Second."


@pytest.mark.parametrize(
    ("wikitext", "redirect_title", "target"),
    [
        ("#REDIRECT [[2026 United Bowl]]\n[[Category:Redirects]]", None, "2026 United Bowl"),
        ("#redirect [[gaza_war#History]]", None, "Gaza war"),
        ("#REDIRECT [[Anything]]", "The Amazing Spider-Man (film)", "The Amazing Spider-Man (film)"),
    ],
)
def test_redirects(wikitext, redirect_title, target):
    page = parse_page(wikitext, redirect_title)
    assert page.is_redirect and page.redirect_target == target
    assert page.lead is None and page.sections == [] and page.n_words == 0


@pytest.mark.parametrize(
    ("path", "stem"),
    [
        ("file:///d/enwiki-20240320-pages-articles.xml.bz2", "enwiki-20240320-pages-articles"),
        (
            "s3://b/dumps/enwiki-20240320-pages-articles1.xml-p1p41242.bz2",
            "enwiki-20240320-pages-articles1.xml-p1p41242",
        ),
        ("file:/x/wcep_portal_daily_html_2025-09_2026-08.jsonl.gz", "wcep_portal_daily_html_2025-09_2026-08"),
        ("/x/wp_current_events_2026-08.rss", "wp_current_events_2026-08"),
        ("file:/x/my%20dump.xml", "my dump"),
    ],
)
def test_input_stem(path, stem):
    assert input_stem(path) == stem


def test_parse_timestamp():
    assert parse_timestamp("2021-04-27T13:53:16Z") == datetime(2021, 4, 27, 13, 53, 16, tzinfo=UTC)
    assert parse_timestamp("not a time") is None
    assert parse_timestamp(None) is None


def test_real_minidump_pages_have_sections_and_categories(shared_data):
    pages = dump_pages(shared_data / "wikipedia" / "dbpedia_minidump_enwiki.xml.bz2")
    assert len(pages) == 27
    parsed = {title: parse_page(text, redirect) for title, (text, redirect) in pages.items()}
    redirects = {t for t, p in parsed.items() if p.is_redirect}
    assert redirects == {"`Abdu'l-Bahá", "The Amazing Spider-Man (2012 film)"}
    articles = [p for t, p in parsed.items() if not p.is_redirect and not t.startswith("Category:")]
    # the disambiguation page is categorised by its {{disambiguation}} template, not by links
    uncategorised = {t for t, p in parsed.items() if not p.categories and not p.is_redirect}
    assert uncategorised == {"Food (disambiguation)"}
    assert sum(bool(p.sections) for p in articles) == len(articles)
    merkel = parsed["Angela Merkel"]
    assert len(merkel.sections) > 40
    assert "Background and early life" in [s.title for s in merkel.sections]
    assert merkel.lead.startswith("Angela Dorothea Merkel")
    assert "Infobox" not in merkel.lead and "{{" not in merkel.lead
    berlin = parsed["Berlin"]
    assert "German state capitals" in berlin.categories
    assert not any("Category:" in s.text for s in berlin.sections if s.title != "See also")


def test_real_table_markup_pages_render_without_markup(shared_data):
    pages = dump_pages(shared_data / "wikipedia" / "enwiki-table-markup.xml.bz2")
    assert len(pages) == 5
    for title, (text, redirect) in pages.items():
        page = parse_page(text, redirect)
        body = "\n".join([page.lead or ""] + [s.text for s in page.sections])
        assert page.n_words > 500, title
        assert "{|" not in body and "|}" not in body and "|-" not in body, title
