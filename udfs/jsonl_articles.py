"""News articles held as JSON Lines (one JSON object per line) → article rows.

``scan_lines`` streams one file (local or S3, plain or gzip) into numbered lines and never raises
for bad input: a file that cannot be opened, is empty or is no text becomes one
``unreadable_file`` row, and a gzip stream that breaks mid-file one ``corrupt_record`` row after
the lines read so far. ``article_row`` maps one line to an ``articles`` row or to a rejected row,
computing ``canonical_url``, ``article_id``, ``text_hash`` and ``language`` exactly as the WARC
path does (``udfs.news_extract``).

A record without a URL gets the stable stand-in ``jsonl://<file stem>/<id>`` (``line-<n>``
without an id) as ``url`` and ``canonical_url``; nothing else is made up. The publish date comes
only from the record's own field: a missing, unparseable or implausible value leaves the article
undated (the null partition), never a guessed date.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote

from udfs import storage
from udfs.ids import stable_id
from udfs.news_extract import (
    CLOCK_SKEW,
    MIN_PUBLISHED,
    _clean,
    _utf8,
    canonical_url,
    detect_language,
    parse_timestamp,
    text_hash,
)
from udfs.urls import host_of, norm_url
from udfs.wikitext import input_stem

EXTRACTOR = "jsonl"
GZIP_MAGIC = b"\x1f\x8b"
# What a damaged gzip or a failing read raises mid-stream.
STREAM_ERRORS = (OSError, EOFError, zlib.error)

Row = dict[str, Any]


@dataclass(frozen=True)
class FieldMap:
    """Which JSON field holds what, and the content rule; the command-line options map one to one."""

    id: str = "id"
    url: str = "url"
    title: str = "title"
    text: str = "text"  # a string, or a list of paragraphs (joined with blank lines)
    published: str = "published"
    language: str = "language"  # declared language, used when detection finds nothing
    host: str | None = None  # host of records whose URL names none
    min_chars: int = 200


def _base(file: str, line_no: int | None, offset: int | None) -> Row:
    return {
        "warc_file": file,
        "warc_record_id": f"line:{line_no}" if line_no is not None else None,
        "record_offset": offset,
        "line_no": line_no,
        "line": None,
        "reason": None,
        "detail": None,
    }


def scan_lines(uri: str, opener: Callable[[str], BinaryIO] = storage.open_input) -> Iterator[Row]:
    """Rows of the non-blank lines of one file: ``line`` holds the raw bytes, ``line_no`` its
    1-based number and ``record_offset`` its byte offset in the (decompressed) stream."""
    try:
        raw = opener(uri)
    except Exception as exc:  # any failure to open is this file's problem, not the job's
        detail = f"cannot open: {type(exc).__name__}: {exc}"
        yield {**_base(uri, None, None), "reason": "unreadable_file", "detail": detail[:500]}
        return
    with raw:
        offset, line_no, seen = 0, 0, 0
        try:
            magic = raw.read(2)
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if magic == GZIP_MAGIC else raw
            for line in stream:
                line_no += 1
                if line.strip():
                    seen += 1
                    yield {**_base(uri, line_no, offset), "line": line}
                offset += len(line)
        except STREAM_ERRORS as exc:
            detail = f"stream unreadable after line {line_no} (offset {offset}): {type(exc).__name__}: {exc}"
            yield {**_base(uri, None, offset), "reason": "corrupt_record", "detail": detail[:500]}
            return
        if not seen:
            yield {
                **_base(uri, None, None),
                "reason": "unreadable_file",
                "detail": "no JSON line in the file",
            }


def _text(value: Any) -> str | None:
    """The article text of a field value: a string, or paragraphs joined with blank lines; None
    when the value is neither."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        return "\n\n".join(p.strip() for p in value if p.strip())
    return None


def _published(value: Any, now: dt.datetime) -> dt.datetime | None:
    """The record's publish time in UTC when it is a full, plausible date string; else None."""
    if not isinstance(value, str):
        return None
    parsed = parse_timestamp(value)
    if parsed is None or not MIN_PUBLISHED <= parsed[0] <= now + CLOCK_SKEW:
        return None
    return parsed[0]


def article_row(scanned: Row, fields: FieldMap, now: dt.datetime) -> Row:
    """The article row of one scanned line (``scan_lines``), or a rejected row (``reason`` set).
    Never raises."""
    out: Row = {
        "warc_file": scanned["warc_file"],
        "warc_record_id": scanned["warc_record_id"],
        "record_offset": scanned["record_offset"],
        "extractor": EXTRACTOR,
    }

    def reject(reason: str, detail: str) -> Row:
        return {**out, "reason": reason, "detail": _utf8(" ".join(detail.split())[:500])}

    try:
        record = json.loads(scanned["line"].decode("utf-8"))
    except UnicodeDecodeError as exc:
        return reject("parse_error", f"not UTF-8: {exc}")
    except ValueError as exc:
        return reject("parse_error", f"not JSON: {exc}")
    if not isinstance(record, dict):
        return reject("parse_error", f"a JSON {type(record).__name__}, not an object")
    record_id = record.get(fields.id)
    has_id = isinstance(record_id, str | int) and not isinstance(record_id, bool) and str(record_id).strip()
    if has_id:
        out["warc_record_id"] = _utf8(str(record_id).strip())
    url = record.get(fields.url)
    if url is None or url == "":
        key = out["warc_record_id"] if has_id else f"line-{scanned['line_no']}"
        canon = f"jsonl://{quote(input_stem(out['warc_file']), safe='')}/{quote(key, safe='')}"
        out.update(url=canon, host=fields.host)
    elif isinstance(url, str) and norm_url(url):
        canon = canonical_url(url, None)
        out.update(url=_utf8(url.strip()), host=host_of(url) or fields.host)
    else:
        return reject("bad_url", f"{fields.url} {str(url)[:200]!r} is not an http(s) URL")
    value = record.get(fields.text)
    text = _utf8(_text(value))
    if text is None and value is not None:
        return reject("parse_error", f"{fields.text} is a JSON {type(value).__name__}, not text")
    if not text:
        return reject("empty", f"no text in field {fields.text!r}")
    if len(text) < fields.min_chars:
        return reject("too_short", f"{len(text)} chars < {fields.min_chars}")
    declared = record.get(fields.language)
    published = _published(record.get(fields.published), now)
    title = record.get(fields.title)
    return {
        **out,
        "article_id": stable_id(canon),
        "canonical_url": canon,
        "title": _utf8(_clean(title)) if isinstance(title, str) else None,
        "text": text,
        "published_at": published,
        "published_date": published.date() if published else None,
        "date_source": f"jsonl:{fields.published}" if published else None,
        "language": detect_language(text, declared.strip().lower() if isinstance(declared, str) else None),
        "n_chars": len(text),
        "text_hash": text_hash(text),
    }
