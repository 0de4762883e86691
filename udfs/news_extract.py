"""From the raw HTML of one news page to one article row: text, title, publish date, language, ids.

Three extractors, chosen by ``ContentRules.extractor``; none touches the network:

* ``hybrid`` (the default): trafilatura's main text (balanced mode, on the page tree already
  parsed for the page's signals), the page's own structured title (``udfs.page_signals``:
  ``og:title`` / JSON-LD ``headline``, the one shown as ``<h1>`` first), and htmldate only when
  the page declares no publish date. ``bench.extraction_check`` scores it against trafilatura and
  news-please on hand-labelled pages.
* ``trafilatura``: ``bare_extraction(..., with_metadata=True)``: text, title and htmldate's date.
* ``newsplease``: ``NewsPlease.from_html(..., fetch_images=False)``.

The publish date comes only from the page itself, tried in this order, first usable value wins:

1. ``jsonld`` / ``meta`` / ``time``: the page's structured publish dates (``udfs.page_signals``),
   parsed with their UTC offset. A value that states its offset beats one that does not.
2. the extractor's own guess (``htmldate`` for hybrid, ``trafilatura``, ``newsplease``).
   news-please drops the UTC offset and, because dateutil fills missing parts from *today*, turns
   a bare time such as "10:30 AM" into today's date; so an extractor date on the day the job runs
   is not trusted.
3. ``url``: a full ``Y/M/D`` date in the URL path (date only, read as 00:00 UTC).

Every candidate must lie between 1900 and one day after the crawl (WARC-Date); the crawl date
itself is never used as a publish date.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lxml import etree

from udfs.ids import stable_id
from udfs.page_signals import (
    DateCandidate,
    EmptyDocumentError,
    PageSignals,
    date_from_url,
    decode_html,
    page_signals,
    parse_html,
    parse_timestamp,
    structured_dates,
)
from udfs.urls import host_of, norm_url

__all__ = ["DateCandidate", "PageSignals", "decode_html", "parse_timestamp", "structured_dates"]

log = logging.getLogger("augury.news_extract")

MIN_PUBLISHED = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
CLOCK_SKEW = dt.timedelta(days=1)  # naive page times may run ahead of UTC by up to 14 h
DEFAULT_EXTRACTOR = "hybrid"


@dataclass(frozen=True)
class Page:
    """One page as the extractors see it: the HTML text, its URL, its lxml tree (read, never
    changed) and what it declares about itself."""

    html: str
    url: str
    doc: etree._Element
    signals: PageSignals

    @classmethod
    def of(cls, html: str, url: str) -> Page:
        doc = parse_html(html)
        return cls(html, url, doc, page_signals(doc, url))


@dataclass(frozen=True)
class Extracted:
    """An extractor's result: main text, title and its own publish-date guess (naive = UTC) with
    the name of the signal that gave it."""

    title: str | None
    text: str
    published: dt.datetime | None
    date_source: str | None = None


@dataclass(frozen=True)
class ContentRules:
    """How candidates become articles: which extractor, and the content filters."""

    extractor: str = DEFAULT_EXTRACTOR
    min_chars: int = 200
    languages: frozenset[str] = frozenset()


# ---------------------------------------------------------------- dates


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


class MissingDependencyError(RuntimeError):
    """An extractor needs a package that is not installed for this page."""


def extract_newsplease(page: Page) -> Extracted:
    """news-please on the HTML string: no download date, no image fetching, no network."""
    from newsplease import NewsPlease

    try:
        article = NewsPlease.from_html(page.html, url=page.url, fetch_images=False)
    except ImportError as exc:  # newspaper4k imports its Chinese / Japanese / … tokenizers lazily
        raise MissingDependencyError(
            f"news-please needs an optional package for this page's language ({exc}); "
            "install it, or use --extractor hybrid, which reads every language"
        ) from None
    if not article:
        return Extracted(None, "", None)
    published = article.date_publish
    if isinstance(published, str):
        parsed = parse_timestamp(published)
        published = parsed[0] if parsed else None
    return Extracted(_clean(article.title), (article.maintext or "").strip(), published, "newsplease")


def extract_trafilatura(page: Page) -> Extracted:
    """trafilatura's main text (comments left out), title and htmldate publish date."""
    import trafilatura

    doc = trafilatura.bare_extraction(page.doc, url=page.url, with_metadata=True, include_comments=False)
    if doc is None:
        return Extracted(None, "", None)
    parsed = parse_timestamp(doc.date) if doc.date else None
    return Extracted(
        _clean(doc.title), (doc.text or "").strip(), parsed[0] if parsed else None, "trafilatura"
    )


def extract_hybrid(page: Page) -> Extracted:
    """trafilatura's main text, the page's structured title, and htmldate's date only when the
    page declares none (the metadata pass trafilatura would run is skipped)."""
    import trafilatura

    doc = trafilatura.bare_extraction(page.doc, url=page.url, with_metadata=False, include_comments=False)
    text = (doc.text or "").strip() if doc is not None else ""
    title = page.signals.titles[0] if page.signals.titles else None
    published = None
    if text and not page.signals.dates:
        import htmldate

        found = htmldate.find_date(page.doc, url=page.url, original_date=True, extensive_search=True)
        published = dt.datetime.fromisoformat(found) if found else None
    return Extracted(title, text, published, "htmldate")


EXTRACTORS: dict[str, Callable[[Page], Extracted]] = {
    "hybrid": extract_hybrid,
    "trafilatura": extract_trafilatura,
    "newsplease": extract_newsplease,
}


def _clean(value: str | None) -> str | None:
    value = " ".join(value.split()) if value else ""
    return value or None


def _utf8(value: str | None) -> str | None:
    """``value`` without lone surrogates (a JSON ``\\ud800`` escape can produce one), which Arrow
    refuses: one such page would otherwise fail its whole task."""
    return value.encode("utf-8", "replace").decode("utf-8") if value else value


# ---------------------------------------------------------------- language, text identity, URLs


# The first 1,000 characters decide (the model's cost grows with the text).
LANGUAGE_CHARS = 1000


@functools.cache
def _language_model():
    """py3langid's model (langid.py's naive Bayes over byte n-grams, deterministic), restricted to
    the languages that have an ISO 639-1 code: Wu or Cantonese text is ``zh``, polytonic Greek
    ``el``, and ``zxx`` (no language) is never an answer."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    model = LanguageIdentifier.from_model_file(MODEL_FILE)
    model.set_languages([code for code in model.labels if len(code) == 2])
    return model


def detect_language(text: str, fallback: str | None = None) -> str | None:
    """ISO 639-1 code of the text's first ``LANGUAGE_CHARS`` characters; the page's declared
    ``lang`` when they hold no letter to judge by. (py3langid replaced langdetect: the same labels
    on the sample pages where langdetect was right, 1/6 of its time, and no random trials.)"""
    sample = text[:LANGUAGE_CHARS]
    code = _language_model().classify(sample)[0] if any(c.isalpha() for c in sample) else fallback
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
        page = Page.of(decode_html(row["payload"], row.get("charset")), url)
    except EmptyDocumentError as exc:
        return reject("empty", f"no HTML content: {exc}")
    except Exception as exc:  # lxml and codecs raise a variety of types on hostile input
        return reject("parse_error", f"{type(exc).__name__}: {exc}")
    try:
        extracted = EXTRACTORS[rules.extractor](page)
    except Exception as exc:  # an extractor bug on one page must not fail the task
        return reject("extractor_error", f"{rules.extractor}: {type(exc).__name__}: {exc}")
    text, title = _utf8(extracted.text), _utf8(extracted.title)
    if not text:
        return reject("empty", f"{rules.extractor} found no main text")
    if len(text) < rules.min_chars:
        return reject("too_short", f"{len(text)} chars < {rules.min_chars}")
    language = detect_language(text, page.signals.lang)
    if rules.languages and language not in rules.languages:
        return reject("language", f"language {language}")
    canon = canonical_url(url, page.signals.canonical)
    source = extracted.date_source or rules.extractor
    published = choose_published(page.signals, source, extracted.published, url, row.get("crawled_at"), now)
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
