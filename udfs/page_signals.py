"""What a news page says about itself, read once with lxml: charset, canonical link, language,
publish dates and titles.

Publish dates come from schema.org JSON-LD (``datePublished``, article types first), publish-time
meta tags and ``<time itemprop=datePublished|pubdate>``, each parsed with its UTC offset; a full
``Y/M/D`` date in the URL path is the last resort (``date_from_url``). Titles come from the page's
structured data (``og:title``, JSON-LD ``headline``, ``twitter:title``) and its ``<title>``, with
the site's name cut off; the one the page also shows as a heading (``<h1>``) wins.
"""

from __future__ import annotations

import codecs
import datetime as dt
import html as html_lib
import json
import re
import unicodedata
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html
from dateutil import parser as dateutil_parser
from lxml import etree

from udfs.urls import host_of

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
    titles: tuple[str, ...] = ()


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
    """Canonical link (absolute), ``<html lang>``, the structured publish dates and the titles."""
    canonical = None
    for link in doc.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        if "canonical" in rel and link.get("href", "").strip():
            canonical = urljoin(url, link.get("href").strip())
            break
    lang = (doc.get("lang") or doc.get("xml:lang") or "").strip().lower() or None
    nodes = jsonld_nodes(doc)
    return PageSignals(
        canonical=canonical,
        lang=lang,
        dates=tuple(structured_dates(doc, nodes)),
        titles=structured_titles(doc, nodes, url),
    )


def structured_dates(
    doc: etree._Element, nodes: list[dict[str, Any]] | None = None
) -> Iterator[DateCandidate]:
    """Publish dates from JSON-LD (``nodes``, read from ``doc`` when not given), meta tags and
    ``<time>`` elements, in that order."""
    for value in _jsonld_dates(jsonld_nodes(doc) if nodes is None else nodes):
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


def _jsonld_dates(nodes: list[dict[str, Any]]) -> list[str]:
    """``datePublished`` values of the JSON-LD objects; those of article types first."""
    values = [(not _is_article(n), n.get("datePublished")) for n in nodes]
    return [v for _, v in sorted(values, key=lambda x: x[0]) if isinstance(v, str)]


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


# ---------------------------------------------------------------- titles

TITLE_META_KEYS = ("og:title", "twitter:title")
SITE_NAME_KEYS = ("og:site_name", "application-name", "twitter:site")
_TITLE_SEPARATORS = re.compile(r"\s+(?:\||-|–|—|:|::|«|»|·)\s+")


def structured_titles(doc: etree._Element, nodes: list[dict[str, Any]], url: str) -> tuple[str, ...]:
    """Title candidates the page declares, best first: the one it also shows as an ``<h1>``,
    then ``og:title``, JSON-LD ``headline`` (article types first), ``twitter:title``, ``<title>``;
    each unescaped, whitespace collapsed and without the site's name."""
    metas = {key: "" for key in (*TITLE_META_KEYS, *SITE_NAME_KEYS)}
    for meta in doc.iter("meta"):
        key = (meta.get("property") or meta.get("name") or "").strip().lower()
        if key in metas and not metas[key]:
            metas[key] = meta.get("content") or ""
    sites = {metas[k] for k in SITE_NAME_KEYS} | {_jsonld_name(n.get("publisher")) for n in nodes}
    sites |= {n.get("name") for n in nodes if _kinds(n) & {"WebSite", "Organization"}}
    site_keys = {_fold(s) for s in sites if isinstance(s, str) and _fold(s)}
    host = host_of(url) or ""
    site_keys |= {label for label in host.split(".")[:-1] if len(label) > 2 and label != "www"}
    headlines = [n.get("headline") for n in sorted(nodes, key=lambda n: not _is_article(n))]
    raw = [metas["og:title"], *headlines, metas["twitter:title"], doc.findtext(".//title")]
    titles = []
    for value in raw:
        title = _without_site(_clean_title(value), site_keys) if isinstance(value, str) else None
        if title and title not in titles:
            titles.append(title)
    shown = [_clean_title(h.text_content()) for h in doc.iter("h1")]
    # A declared title made of a shown heading plus section or site segments ("Site - Blog -
    # Heading") stands for that heading.
    parts = [h for h in shown if h and any(_is_segment(h, t) for t in titles) and h not in titles]
    return tuple(sorted([*parts[:1], *titles], key=lambda t: t not in shown))


def _is_segment(part: str, title: str) -> bool:
    """True when ``title`` is ``part`` with separator-delimited segments before or after it."""
    if len(title) > len(part) and title.endswith(part):
        return bool(re.search(_TITLE_SEPARATORS.pattern + "$", title[: -len(part)]))
    if len(title) > len(part) and title.startswith(part):
        return bool(re.match(_TITLE_SEPARATORS.pattern, title[len(part) :]))
    return False


def _clean_title(value: str | None) -> str:
    return " ".join(html_lib.unescape(value or "").split())


def _fold(value: str) -> str:
    """Lower case, accents and everything but letters and digits removed: ``Agência Brasil`` and
    the host label ``agenciabrasil`` fold alike."""
    decomposed = unicodedata.normalize("NFKD", value.lower())
    return "".join(c for c in decomposed if c.isalnum())


def _without_site(title: str, site_keys: set[str]) -> str:
    """``title`` without a leading or trailing segment (after ``|``, `` - ``, `` : ``, …) that names
    the site; unchanged when nothing else would be left."""
    parts = _TITLE_SEPARATORS.split(title)
    if len(parts) < 2:
        return title

    def is_site(part: str) -> bool:
        folded = _fold(part)
        return bool(folded) and any(key == folded or (len(key) > 3 and key in folded) for key in site_keys)

    if is_site(parts[-1]):
        return title[: title.rindex(parts[-1])].rstrip(" |-–—:«»·")
    if is_site(parts[0]):
        return title[len(parts[0]) :].lstrip(" |-–—:«»·")
    return title


# ---------------------------------------------------------------- JSON-LD


def jsonld_nodes(doc: etree._Element) -> list[dict[str, Any]]:
    """Every JSON object in the page's JSON-LD blocks (``@graph`` and nested ones too), in order;
    a block that is not valid JSON is skipped."""
    nodes: list[dict[str, Any]] = []
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
                nodes.append(node)
                stack[:0] = [v for v in node.values() if isinstance(v, dict | list)]
    return nodes


def _kinds(node: dict[str, Any]) -> set[str]:
    kind = node.get("@type")
    return {str(k) for k in kind} if isinstance(kind, list) else {str(kind or "")}


def _is_article(node: dict[str, Any]) -> bool:
    return any("Article" in k or "BlogPosting" in k for k in _kinds(node))


def _jsonld_name(value: Any) -> str | None:
    return value.get("name") if isinstance(value, dict) else None
