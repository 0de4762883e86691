"""udfs.news_extract: decoding, page signals, publish dates, extractors and the per-record rules,
on real CC-NEWS pages and on hand-made edge cases."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udfs import news_extract as ne
from udfs.ids import stable_id
from udfs.warc import HeaderFilter, scan_file

UTC = dt.UTC
NOW = dt.datetime.now(UTC)
CRAWL = dt.datetime(2022, 9, 18, 14, 0, tzinfo=UTC)
BODY = (
    "<p>" + "The council voted on the new budget after a long debate about schools and roads. " * 6 + "</p>"
)


@pytest.fixture(scope="module")
def ccnews(shared_data) -> dict[str, dict]:
    """Candidate rows of the real CC-NEWS sample, by URL."""
    path = shared_data / "warc" / "ccnews_2022-09_39records_reconstructed.warc.gz"
    return {r["url"]: r for r in scan_file(str(path), HeaderFilter()) if r["reason"] is None}


def page(head: str = "", body: str = BODY, lang: str = "en") -> str:
    return f"<!DOCTYPE html><html lang='{lang}'><head><title>Budget vote</title>{head}</head><body><article><h1>Budget vote</h1>{body}</article></body></html>"


def candidate(
    html: str, url: str = "https://news.example.org/story", crawled_at: dt.datetime | None = CRAWL
) -> dict:
    return {
        "warc_file": "file:///x.warc.gz",
        "warc_record_id": "<urn:uuid:1>",
        "record_offset": 0,
        "url": url,
        "host": "news.example.org",
        "crawled_at": crawled_at,
        "payload": html.encode(),
        "charset": "utf-8",
        "reason": None,
        "detail": None,
    }


def process(html: str, extractor: str = "trafilatura", **kwargs) -> dict:
    rules = ne.ContentRules(extractor=extractor, **kwargs)
    return ne.process_candidate(candidate(html), rules, NOW)


# ---------------------------------------------------------------- decoding


def test_decode_html_follows_header_then_meta_then_utf8():
    latin = "café".encode("cp1252")
    assert ne.decode_html(latin, "iso-8859-1") == "café"
    assert ne.decode_html(b'<meta charset="windows-1251">' + "Москва".encode("cp1251"), None).endswith(
        "Москва"
    )
    assert ne.decode_html("Москва".encode(), "no-such-charset") == "Москва"
    assert ne.decode_html(b"\xef\xbb\xbfhello", "cp1252") == "hello"  # a BOM wins over the header
    assert ne.decode_html("北京".encode("gb18030"), "gb2312") == "北京"
    assert "\ufffd" in ne.decode_html(b"caf\xe9", "utf-8")  # bad bytes are replaced, not fatal


# ---------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("value", "expected", "explicit"),
    [
        ("2022-09-15T22:59:00.615Z", dt.datetime(2022, 9, 15, 22, 59, 0, 615000, tzinfo=UTC), True),
        ("2022-09-16T01:53:00+03:00", dt.datetime(2022, 9, 15, 22, 53, tzinfo=UTC), True),
        ("2022-09-15 22:43:38", dt.datetime(2022, 9, 15, 22, 43, 38, tzinfo=UTC), False),
        ("2022-09-15 22:43:38.000000 CEST", dt.datetime(2022, 9, 15, 20, 43, 38, tzinfo=UTC), True),
        ("September 18, 2022 10:05 AM EDT", dt.datetime(2022, 9, 18, 14, 5, tzinfo=UTC), True),
        ("2022-09-18", dt.datetime(2022, 9, 18, tzinfo=UTC), False),
    ],
)
def test_parse_timestamp_converts_to_utc(value, expected, explicit):
    assert ne.parse_timestamp(value) == (expected, explicit)


@pytest.mark.parametrize("value", ["10:30 AM", "Sept 15", "2022", "yesterday", "", "P6M,32S", "x" * 100])
def test_parse_timestamp_refuses_incomplete_dates(value):
    """dateutil would fill the missing year/month/day from a default (today); we refuse instead."""
    assert ne.parse_timestamp(value) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://chicago.suntimes.com/2022/9/15/23355194/indiana-refinery", dt.date(2022, 9, 15)),
        ("https://www.npr.org/2022/09/18/1123690268/puerto-rico", dt.date(2022, 9, 18)),
        ("https://1prime.ru/business/20220916/838132051.html", dt.date(2022, 9, 16)),
        ("https://site.com/news/2022-09-15-budget-vote", dt.date(2022, 9, 15)),
        ("https://agenciabrasil.ebc.com.br/economia/noticia/2022-09/dolar-sobe", None),  # month only
        ("https://site.com/2022/13/45/nonsense", None),
        ("https://site.com/item/838132051", None),
    ],
)
def test_date_from_url(url, expected):
    got = ne.date_from_url(url)
    assert (got.date() if got else None) == expected


def test_structured_dates_prefer_article_jsonld_and_known_meta():
    head = """
      <script type="application/ld+json">not json at all</script>
      <script type="application/ld+json">{"@graph": [
          {"@type": "WebPage", "datePublished": "2020-01-01T00:00:00Z"},
          {"@type": ["NewsArticle"], "datePublished": "2022-09-15T10:00:00-04:00"}]}</script>
      <meta property="article:modified_time" content="2022-09-17T00:00:00Z">
      <meta name="date" content="2022-09-14">
      <meta property="article:published_time" content="2022-09-15T14:00:00Z">"""
    doc = ne.parse_html(
        page(head, body=BODY + "<time itemprop='datePublished' datetime='2022-09-15T14:00Z'></time>")
    )
    dates = [(c.source, c.value) for c in ne.structured_dates(doc)]
    assert dates[0] == ("jsonld", dt.datetime(2022, 9, 15, 14, tzinfo=UTC))
    assert dates[1] == ("jsonld", dt.datetime(2020, 1, 1, tzinfo=UTC))
    assert [s for s, _ in dates[2:]] == [
        "meta",
        "meta",
        "time",
    ]  # published_time before date; modified ignored
    assert dates[2][1] == dt.datetime(2022, 9, 15, 14, tzinfo=UTC)


def test_choose_published_rules():
    def signals(*cands):
        return ne.PageSignals(canonical=None, lang=None, dates=tuple(cands))

    naive = ne.DateCandidate("jsonld", dt.datetime(2022, 9, 15, 22, 43, tzinfo=UTC), False)
    aware = ne.DateCandidate("meta", dt.datetime(2022, 9, 15, 20, 43, tzinfo=UTC), True)
    future = ne.DateCandidate("jsonld", dt.datetime(2022, 9, 25, tzinfo=UTC), True)
    url = "https://x.org/2022/09/14/story"
    # a value with an explicit offset beats an earlier-listed naive one
    assert ne.choose_published(signals(naive, aware), "newsplease", None, url, CRAWL, NOW) == aware
    # a date after the crawl is impossible: fall through to the extractor, then the URL
    extractor_date = dt.datetime(2022, 9, 16, 8, 0)
    got = ne.choose_published(signals(future), "newsplease", extractor_date, url, CRAWL, NOW)
    assert (got.source, got.value) == ("newsplease", extractor_date.replace(tzinfo=UTC))
    assert ne.choose_published(signals(future), "newsplease", None, url, CRAWL, NOW).source == "url"
    # an extractor date on the day the job runs is dateutil's fill-in, not a publish date
    assert (
        ne.choose_published(signals(), "newsplease", NOW.replace(tzinfo=None), "https://x.org/a", None, NOW)
        is None
    )
    assert ne.choose_published(signals(), "newsplease", None, "https://x.org/a", CRAWL, NOW) is None


def test_newsplease_today_fallback_is_caught():
    """news-please turns a bare "10:30 AM" into today's date; the crawl date is never used either."""
    html = page(body=BODY + "<div class='date'>10:30 AM</div>")
    raw = ne.extract_newsplease(ne.Page.of(html, "https://news.example.org/story"))
    assert raw.published is not None and raw.published.date() == dt.datetime.now().date()  # the trap is real
    row = process(html, extractor="newsplease")
    assert row["reason"] is None and row["text"]
    assert row["published_at"] is None and row["date_source"] is None and row["published_date"] is None
    assert row["crawled_at"] == CRAWL


def test_real_pages_get_utc_dates_news_please_gets_wrong(ccnews):
    """1prime.ru declares +03:00 and agenciabrasil -03:00: news-please drops the offset and even
    lands on the wrong UTC day; the page's own meta tag, read with its offset, does not."""
    rules = ne.ContentRules(extractor="newsplease")
    moscow = ccnews["https://1prime.ru/business/20220916/838132051.html"]
    assert ne.extract_newsplease(
        ne.Page.of(ne.decode_html(moscow["payload"]), moscow["url"])
    ).published == dt.datetime(2022, 9, 16, 1, 53)
    row = ne.process_candidate(moscow, rules, NOW)
    assert row["published_at"] == dt.datetime(2022, 9, 15, 22, 53, tzinfo=UTC)
    assert (row["published_date"], row["date_source"], row["language"]) == (
        dt.date(2022, 9, 15),
        "meta",
        "ru",
    )
    brasil = ccnews[
        "https://agenciabrasil.ebc.com.br/economia/noticia/2022-09/dolar-sobe-para-r-523-com-temores-sobre-juros-nos-estados-unidos"
    ]
    row = ne.process_candidate(brasil, rules, NOW)
    assert row["published_at"] == dt.datetime(2022, 9, 16, 1, 25, tzinfo=UTC) and row["language"] == "pt"
    for r in (moscow, brasil):
        assert row["published_at"] != r["crawled_at"]


def test_real_page_with_trafilatura(ccnews):
    row = ne.process_candidate(
        ccnews["https://www.npr.org/2022/09/18/1123690268/puerto-rico-tropical-storm-fiona"],
        ne.ContentRules(extractor="trafilatura"),
        NOW,
    )
    assert row["reason"] is None and row["extractor"] == "trafilatura"
    assert (
        "Puerto Rico" in row["title"] and "Fiona" in row["text"] and row["n_chars"] == len(row["text"]) > 1000
    )
    assert (
        row["published_at"] == dt.datetime(2022, 9, 18, 11, 56, 18, tzinfo=UTC)
        and row["date_source"] == "jsonld"
    )
    assert row["canonical_url"] == "https://npr.org/2022/09/18/1123690268/puerto-rico-tropical-storm-fiona"
    assert row["article_id"] == stable_id(row["canonical_url"])


def test_language_comes_from_the_text_not_the_html_lang(ccnews):
    """abc7.com serves its Spanish stories with <html lang="en">."""
    row = ne.process_candidate(
        ccnews["https://abc7.com/hollywood-sobredosis-escuela-secundaria-bernstein-arrestos/12232847/"],
        ne.ContentRules(extractor="trafilatura", languages=frozenset({"en"})),
        NOW,
    )
    assert row["reason"] == "language" and row["detail"] == "language es"


# ---------------------------------------------------------------- ids and canonical URLs


def test_canonical_url_same_host_only():
    url = "https://www.example.org/story?id=1&utm_source=x"
    assert (
        ne.canonical_url(url, "https://example.org/story-canonical/") == "https://example.org/story-canonical"
    )
    assert ne.canonical_url(url, "https://aggregator.com/copy") == "https://example.org/story?id=1"
    assert ne.canonical_url(url, None) == "https://example.org/story?id=1"
    doc = ne.parse_html(page("<link rel='Canonical' href='/story/1'>"))
    assert ne.page_signals(doc, url).canonical == "https://www.example.org/story/1"


def test_text_hash_ignores_whitespace_only():
    assert ne.text_hash("a  b\n\nc ") == ne.text_hash("a b c")
    assert ne.text_hash("a b c") != ne.text_hash("a b d")


# ---------------------------------------------------------------- per-record rules


def test_article_row_from_hand_made_page():
    head = "<link rel='canonical' href='https://news.example.org/story/'><meta property='article:published_time' content='2022-09-15T10:00:00+02:00'>"
    row = process(page(head))
    assert row["reason"] is None
    assert (row["canonical_url"], row["title"]) == ("https://news.example.org/story", "Budget vote")
    assert row["published_at"] == dt.datetime(2022, 9, 15, 8, tzinfo=UTC) and row["language"] == "en"
    assert row["text_hash"] == ne.text_hash(row["text"])


@pytest.mark.parametrize(
    ("html", "kwargs", "reason"),
    [
        ("   \n ", {}, "empty"),
        ("<!DOCTYPE html><!-- nothing -->", {}, "empty"),
        ("<html><body><script>var a = 1;</script><img src=a.png></body></html>", {}, "empty"),
        (page(body="<p>Short story.</p>"), {}, "too_short"),
        (page(body=BODY.replace("The council", "Le conseil")), {"min_chars": 10_000}, "too_short"),
        (page(), {"languages": frozenset({"de", "fr"})}, "language"),
    ],
)
def test_content_rejections(html, kwargs, reason):
    row = process(html, **kwargs)
    assert row["reason"] == reason and row["detail"]
    assert row["url"] == "https://news.example.org/story" and "text" not in row


def test_errors_become_reasons(monkeypatch):
    def broken(page):
        raise RuntimeError("boom\n  on two lines")

    monkeypatch.setitem(ne.EXTRACTORS, "trafilatura", broken)
    row = process(page())
    assert (row["reason"], row["detail"]) == (
        "extractor_error",
        "trafilatura: RuntimeError: boom on two lines",
    )

    def unparsable(html):
        raise ValueError("hostile markup")

    monkeypatch.setattr(ne.Page, "of", classmethod(lambda cls, html, url: unparsable(html)))
    assert process(page())["reason"] == "parse_error"


def test_lone_surrogates_are_replaced(monkeypatch):
    """An extractor can hand back text with a lone surrogate; Arrow would refuse the whole batch."""
    monkeypatch.setitem(
        ne.EXTRACTORS, "trafilatura", lambda page: ne.Extracted("T\ud800", BODY + "\udc00", None)
    )
    row = process(page())
    assert row["reason"] is None and row["title"] == "T?" and row["text"].endswith("?")
    pa.array([row["title"], row["text"]])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.binary(max_size=2000) | st.text(max_size=2000).map(str.encode))
def test_any_payload_gives_a_row_never_an_exception(payload):
    row = ne.process_candidate(
        {**candidate(""), "payload": payload}, ne.ContentRules("trafilatura", min_chars=1), NOW
    )
    assert row["reason"] in (None, "empty", "too_short", "parse_error", "extractor_error")
    if row["reason"] is None:
        assert row["text"] and row["article_id"]


# ---------------------------------------------------------------- the default extractor


def test_hybrid_takes_the_structured_title_the_page_shows():
    head = """<title>Budget vote passes after long debate | The Example Times</title>
      <meta property="og:site_name" content="The Example Times">
      <meta property="og:title" content="Budget vote passes | The Example Times">
      <script type="application/ld+json">{"@type": "NewsArticle", "headline": "Council passes budget &#8211; at last"}</script>"""
    html = page(head).replace("<h1>Budget vote</h1>", "<h1>Council passes budget – at last</h1>")
    row = process(html, extractor="hybrid")
    assert row["reason"] is None and row["extractor"] == "hybrid"
    assert row["title"] == "Council passes budget – at last"  # JSON-LD, unescaped, is the one shown
    no_heading = page(head).replace("<h1>Budget vote</h1>", "")
    assert process(no_heading, extractor="hybrid")["title"] == "Budget vote passes"  # og:title, site cut


def test_titles_drop_site_segments_and_keep_the_shown_heading():
    url = "https://commoncrawl.org/blog/x"
    doc = ne.parse_html(page("<meta property='og:title' content='Common Crawl - Blog - Web Graphs 2024'>"))
    assert ne.page_signals(doc, url).titles == ("Budget vote", "Blog - Web Graphs 2024")
    shown = page("<meta property='og:title' content='Common Crawl - Blog - Web Graphs 2024'>").replace(
        "<h1>Budget vote</h1>", "<h1>Web Graphs 2024</h1>"
    )
    assert ne.page_signals(ne.parse_html(shown), url).titles[0] == "Web Graphs 2024"
    dash = ne.parse_html(page("<meta property='og:title' content='Spain - France: 2-1'>"))
    assert ne.page_signals(dash, "https://news.example.org/x").titles[1] == "Spain - France: 2-1"


def test_hybrid_dates_from_the_page_then_htmldate(ccnews):
    npr = ccnews["https://www.npr.org/2022/09/18/1123690268/puerto-rico-tropical-storm-fiona"]
    row = ne.process_candidate(npr, ne.ContentRules(), NOW)
    assert row["extractor"] == ne.DEFAULT_EXTRACTOR == "hybrid" and row["date_source"] == "jsonld"
    assert row["title"] == "Anxiety is high in Puerto Rico as Fiona closes in and threatens historic rainfall"
    visible = page(body=BODY + "<p class='date'>Published March 26, 2022</p>")
    row = process(visible, extractor="hybrid")
    assert (row["published_date"], row["date_source"]) == (dt.date(2022, 3, 26), "htmldate")


def test_newsplease_without_a_language_package_is_a_clear_reason(monkeypatch):
    import newsplease

    def needs_jieba(*args, **kwargs):
        raise ImportError("You must install jieba before using the Chinese tokenizer.")

    monkeypatch.setattr(newsplease.NewsPlease, "from_html", needs_jieba)
    row = process(page(), extractor="newsplease")
    assert row["reason"] == "extractor_error"
    assert "jieba" in row["detail"] and "--extractor hybrid" in row["detail"]
