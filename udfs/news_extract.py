"""From the raw HTML of one news page to one article row: text, title, publish date, language, ids.

Extraction never touches the network: news-please runs as ``from_html(..., fetch_images=False)``
and trafilatura on the HTML string. The publish date comes only from the page itself, tried in
this order, first usable value wins:

1. ``jsonld`` / ``meta`` / ``time``: schema.org ``datePublished``, publish-time meta tags and
   ``<time itemprop=datePublished|pubdate>``, parsed here with their UTC offset. A value that
   states its offset beats one that does not (naive values are read as UTC).
2. ``newsplease`` / ``trafilatura``: the extractor's own guess. news-please drops the UTC offset
   and, because dateutil fills missing parts from *today*, turns a bare time such as "10:30 AM"
   into today's date; so an extractor date on the day the job runs is not trusted.
3. ``url``: a full ``Y/M/D`` date in the URL path (date only, read as 00:00 UTC).

Every candidate must lie between 1900 and one day after the crawl (WARC-Date); the crawl date
itself is never used as a publish date.
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html
from dateutil import parser as dateutil_parser
from lxml import etree

from udfs.ids import stable_id
from udfs.urls import host_of, norm_url

log = logging.getLogger("augury.news_extract")

MIN_PUBLISHED = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
CLOCK_SKEW = dt.timedelta(days=1)  # naive page times may run ahead of UTC by up to 14 h

# Publish-time meta tags (lower-cased property / name / itemprop), most specific first.
META_DATE_KEYS = (
    "article:published_time",
    "og:article:published_time",
    "og:published_time",
    "article:published",
    "datepublished",
    "publishdate",
    "publish-date",
    "publish_date",
    "published-date",
    "pubdate",
    "parsely-pub-date",
    "sailthru.date",
    "dc.date.issued",
    "dcterms.issued",
    "dc.date",
    "dcterms.date",
    "date",
)
_META_RANK = {k: i for i, k in enumerate(META_DATE_KEYS)}

# Zone abbreviations dateutil does not know by itself (ambiguous ones such as IST are left out).
TZ_ABBREVIATIONS = {
    name: hours * 3600
    for name, hours in {
        "UTC": 0, "GMT": 0, "EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6,
        "PST": -8, "PDT": -7, "CET": 1, "CEST": 2, "BST": 1, "EET": 2, "EEST": 3, "MSK": 3, "JST": 9,
    }.items()
}  # fmt: skip

_URL_DATE = (
    re.compile(r"(?<!\d)((?:19|20)\d\d)[/_-](\d{1,2})[/_-](\d{1,2})(?!\d)"),
    re.compile(r"/((?:19|20)\d\d)(\d\d)(\d\d)(?=/|[-_.]|$)"),
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([\w.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_CHARSET_ALIASES = {"gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "iso-8859-1": "cp1252"}


class EmptyDocumentError(ValueError):
    """The payload holds no HTML element (blank, or only a doctype or comments)."""


@dataclass(frozen=True)
class DateCandidate:
    """A publish time one signal of the page gives, in UTC."""

    source: str
    value: dt.datetime
    explicit_tz: bool


@dataclass(frozen=True)
class PageSignals:
    """What the page declares about itself, read once with lxml."""

    canonical: str | None
    lang: str | None
    dates: tuple[DateCandidate, ...]


@dataclass(frozen=True)
class Extracted:
    """An extractor's result: main text, title and its own publish-date guess (naive = UTC)."""

    title: str | None
    text: str
    published: dt.datetime | None


@dataclass(frozen=True)
class ContentRules:
    """How candidates become articles: which extractor, and the content filters."""

    extractor: str = "newsplease"
    min_chars: int = 200
    languages: frozenset[str] = frozenset()


# ---------------------------------------------------------------- decoding and page signals


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    name = _CHARSET_ALIASES.get(name.lower(), name.lower())
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_html(payload: bytes, charset: str | None = None) -> str:
    """HTML text of a payload: BOM, else the HTTP charset, else ``<meta charset>``, else UTF-8.
    Undecodable bytes are replaced rather than failing the record."""
    if payload.startswith(codecs.BOM_UTF8):
        return payload[len(codecs.BOM_UTF8) :].decode("utf-8", errors="replace")
    declared = _META_CHARSET.search(payload[:4096])
    codec = _codec(charset) or _codec(declared.group(1).decode("ascii", "ignore") if declared else None)
    return payload.decode(codec or "utf-8", errors="replace")


def parse_html(html: str) -> etree._Element:
    """The lxml tree of a page; raises EmptyDocumentError when there is nothing to parse."""
    html = _XML_DECLARATION.sub("", html, count=1)  # lxml refuses str input that declares an encoding
    if not html.strip():
        raise EmptyDocumentError("blank payload")
    try:
        return lxml.html.document_fromstring(html)
    except etree.ParserError as exc:  # lxml's way of saying "Document is empty"
        raise EmptyDocumentError(str(exc)) from exc


def page_signals(doc: etree._Element, url: str) -> PageSignals:
    """Canonical link (absolute), ``<html lang>`` and the page's structured publish dates."""
    canonical = None
    for link in doc.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        if "canonical" in rel and link.get("href", "").strip():
            canonical = urljoin(url, link.get("href").strip())
            break
    lang = (doc.get("lang") or doc.get("xml:lang") or "").strip().lower() or None
    return PageSignals(canonical=canonical, lang=lang, dates=tuple(structured_dates(doc)))


def structured_dates(doc: etree._Element) -> Iterator[DateCandidate]:
    """Publish dates from JSON-LD, meta tags and ``<time>`` elements, in that order."""
    for value in _jsonld_dates(doc):
        if cand := _candidate("jsonld", value):
            yield cand
    metas = []
    for meta in doc.iter("meta"):
        for attr in ("property", "name", "itemprop"):
            key = (meta.get(attr) or "").strip().lower()
            if key in _META_RANK and meta.get("content"):
                metas.append((_META_RANK[key], meta.get("content")))
                break
    for _, value in sorted(metas, key=lambda m: m[0]):
        if cand := _candidate("meta", value):
            yield cand
    for el in doc.xpath("//time[@itemprop='datePublished' or @pubdate]|//*[@itemprop='datePublished']"):
        value = el.get("datetime") or el.get("content") or el.text_content()
        if value and (cand := _candidate("time", value)):
            yield cand


def _jsonld_dates(doc: etree._Element) -> list[str]:
    """``datePublished`` values of every JSON-LD block; those of article types first."""
    article, other = [], []
    for script in doc.xpath("//script[@type='application/ld+json']"):
        try:
            data = json.loads(script.text_content() or "", strict=False)
        except ValueError:
            continue
        stack = [data]
        while stack:
            node = stack.pop(0)
            if isinstance(node, list):
                stack[:0] = node
            elif isinstance(node, dict):
                value = node.get("datePublished")
                if isinstance(value, str):
                    kind = node.get("@type")
                    kinds = " ".join(kind) if isinstance(kind, list) else str(kind or "")
                    (article if "Article" in kinds or "BlogPosting" in kinds else other).append(value)
                stack[:0] = [v for v in node.values() if isinstance(v, dict | list)]
    return article + other


# ---------------------------------------------------------------- dates


def _candidate(source: str, value: str) -> DateCandidate | None:
    parsed = parse_timestamp(value)
    if parsed is None:
        return None
    return DateCandidate(source, parsed[0], parsed[1])


_DEFAULT_A = dt.datetime(2001, 1, 1)
_DEFAULT_B = dt.datetime(2002, 2, 2)


def parse_timestamp(value: str) -> tuple[dt.datetime, bool] | None:
    """``(UTC datetime, had an explicit offset)`` of a date/time string, or None.

    ISO 8601 first; otherwise dateutil, parsed twice with different defaults so that a value
    missing its year, month or day (which dateutil would silently borrow) is refused.
    """
    value = value.strip()
    if not value or len(value) > 80:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = dateutil_parser.parse(value, default=_DEFAULT_A, tzinfos=TZ_ABBREVIATIONS)
                b = dateutil_parser.parse(value, default=_DEFAULT_B, tzinfos=TZ_ABBREVIATIONS)
        except (ValueError, OverflowError):
            return None
        if a.date() != b.date():
            return None
        parsed = a
    explicit = parsed.tzinfo is not None
    if not explicit:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC), explicit
    except OverflowError:
        return None


def date_from_url(url: str) -> dt.datetime | None:
    """A full date in the URL path (``/2022/9/15/``, ``/2022-09-15-…``, ``/20220916/``), at 00:00 UTC."""
    path = urlsplit(url).path
    for pattern in _URL_DATE:
        for match in pattern.finditer(path):
            year, month, day = (int(g) for g in match.groups())
            try:
                return dt.datetime(year, month, day, tzinfo=dt.UTC)
            except ValueError:
                continue
    return None


def _plausible(value: dt.datetime, crawled_at: dt.datetime | None, now: dt.datetime) -> bool:
    return MIN_PUBLISHED <= value <= (crawled_at or now) + CLOCK_SKEW


def choose_published(
    signals: PageSignals,
    extractor_name: str,
    extractor_date: dt.datetime | None,
    url: str,
    crawled_at: dt.datetime | None,
    now: dt.datetime,
) -> DateCandidate | None:
    """The publish time and the signal that gave it, by the rules in the module docstring."""
    plausible = [c for c in signals.dates if _plausible(c.value, crawled_at, now)]
    if plausible:
        return next((c for c in plausible if c.explicit_tz), plausible[0])
    if extractor_date is not None:
        value = extractor_date if extractor_date.tzinfo else extractor_date.replace(tzinfo=dt.UTC)
        value = value.astimezone(dt.UTC)
        if _plausible(value, crawled_at, now) and value.date() != now.date():
            return DateCandidate(extractor_name, value, False)
    from_url = date_from_url(url)
    if from_url is not None and _plausible(from_url, crawled_at, now):
        return DateCandidate("url", from_url, False)
    return None


# ---------------------------------------------------------------- extractors


def extract_newsplease(html: str, url: str) -> Extracted:
    """news-please on the HTML string: no download date, no image fetching, no network."""
    from newsplease import NewsPlease

    article = NewsPlease.from_html(html, url=url, fetch_images=False)
    if not article:
        return Extracted(None, "", None)
    published = article.date_publish
    if isinstance(published, str):
        parsed = parse_timestamp(published)
        published = parsed[0] if parsed else None
    return Extracted(_clean(article.title), (article.maintext or "").strip(), published)


def extract_trafilatura(html: str, url: str) -> Extracted:
    """trafilatura's main-text extraction (comments left out); its date comes from htmldate."""
    import trafilatura

    doc = trafilatura.bare_extraction(html, url=url, with_metadata=True, include_comments=False)
    if doc is None:
        return Extracted(None, "", None)
    parsed = parse_timestamp(doc.date) if doc.date else None
    return Extracted(_clean(doc.title), (doc.text or "").strip(), parsed[0] if parsed else None)


EXTRACTORS: dict[str, Callable[[str, str], Extracted]] = {
    "newsplease": extract_newsplease,
    "trafilatura": extract_trafilatura,
}


def _clean(value: str | None) -> str | None:
    value = " ".join(value.split()) if value else ""
    return value or None


def _utf8(value: str | None) -> str | None:
    """``value`` without lone surrogates (a JSON ``\\ud800`` escape can produce one), which Arrow
    refuses: one such page would otherwise fail its whole task."""
    return value.encode("utf-8", "replace").decode("utf-8") if value else value


# ---------------------------------------------------------------- language, text identity, URLs


_LANGDETECT_READY = False


def detect_language(text: str, fallback: str | None = None) -> str | None:
    """ISO 639-1 code of the text (langdetect on its first 2,000 characters, fixed seed so the
    answer is reproducible); the page's declared ``lang`` when detection finds nothing."""
    global _LANGDETECT_READY
    from langdetect import DetectorFactory, LangDetectException, detect

    if not _LANGDETECT_READY:
        DetectorFactory.seed = 0
        _LANGDETECT_READY = True
    try:
        code = detect(text[:2000])
    except LangDetectException:
        code = fallback
    return code.split("-")[0].lower() if code else None


def normalize_text(text: str) -> str:
    """Whitespace collapsed to single spaces: the form text hashes are taken of."""
    return " ".join(text.split())


def text_hash(text: str) -> str:
    return stable_id(normalize_text(text))


def canonical_url(url: str, declared: str | None) -> str | None:
    """``norm_url`` of the page's declared canonical link when it is on the same host, else of the URL."""
    if declared and host_of(declared) == host_of(url):
        canon = norm_url(declared)
        if canon:
            return canon
    return norm_url(url)


# ---------------------------------------------------------------- one candidate → one row


def process_candidate(row: dict[str, Any], rules: ContentRules, now: dt.datetime) -> dict[str, Any]:
    """Turn a scan candidate (``udfs.warc`` row with a payload) into an article row, or into a
    rejected row (``reason`` set). Never raises: every failure is a reason with a detail."""
    out = {
        k: row.get(k) for k in ("warc_file", "warc_record_id", "record_offset", "url", "host", "crawled_at")
    }
    out["extractor"] = rules.extractor

    def reject(reason: str, detail: str) -> dict[str, Any]:
        detail = _utf8(" ".join(detail.split())[:500])
        if reason in ("parse_error", "extractor_error"):
            log.warning(
                "stage=extract shard=%s offset=%s reason=%s %s",
                out["warc_file"],
                out["record_offset"],
                reason,
                detail,
            )
        return {**out, "reason": reason, "detail": detail}

    url = row["url"]
    try:
        html = decode_html(row["payload"], row.get("charset"))
        doc = parse_html(html)
        signals = page_signals(doc, url)
    except EmptyDocumentError as exc:
        return reject("empty", f"no HTML content: {exc}")
    except Exception as exc:  # lxml and codecs raise a variety of types on hostile input
        return reject("parse_error", f"{type(exc).__name__}: {exc}")
    try:
        extracted = EXTRACTORS[rules.extractor](html, url)
    except Exception as exc:  # an extractor bug on one page must not fail the task
        return reject("extractor_error", f"{rules.extractor}: {type(exc).__name__}: {exc}")
    text, title = _utf8(extracted.text), _utf8(extracted.title)
    if not text:
        return reject("empty", f"{rules.extractor} found no main text")
    if len(text) < rules.min_chars:
        return reject("too_short", f"{len(text)} chars < {rules.min_chars}")
    language = detect_language(text, signals.lang)
    if rules.languages and language not in rules.languages:
        return reject("language", f"language {language}")
    canon = canonical_url(url, signals.canonical)
    published = choose_published(
        signals, rules.extractor, extracted.published, url, row.get("crawled_at"), now
    )
    return {
        **out,
        "article_id": stable_id(canon),
        "canonical_url": canon,
        "title": title,
        "text": text,
        "published_at": published.value if published else None,
        "published_date": published.value.date() if published else None,
        "date_source": published.source if published else None,
        "language": language,
        "n_chars": len(text),
        "text_hash": text_hash(text),
        "reason": None,
        "detail": None,
    }
