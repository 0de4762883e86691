"""Streaming WARC files and filtering their records on WARC and HTTP headers alone.

``scan_file`` turns one WARC file into rows: a *candidate* row (reason ``None``) carries the raw
HTML payload of a record that passed every header filter; every other record becomes a rejected
row with a reason from ``udfs.schemas.ARTICLE_REJECT_REASONS``. No HTML is parsed here, and the
payload of a record that fails a header filter is never read, so cheap filters (record type,
status, MIME, host allow-list) cost almost nothing.

A damaged file never raises: a truncated record becomes ``corrupt_record``, a corrupt stretch of
the stream becomes one ``corrupt_record`` row and reading resumes at the next readable record,
and a file that cannot be opened, is empty or is not a WARC becomes one ``unreadable_file`` row.
"""

from __future__ import annotations

import datetime as dt
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord

from udfs import storage
from udfs.urls import clean_target_uri, host_matches, host_of, norm_url

log = logging.getLogger("augury.warc")

HTML_MIMES = frozenset({"text/html", "application/xhtml+xml"})
GZIP_MAGIC = b"\x1f\x8b\x08"
_RESYNC_BLOCK = 1 << 20

# Errors warcio (and the gzip/zlib layer beneath it) raises on a damaged stream.
STREAM_ERRORS = (ArchiveLoadFailed, zlib.error, EOFError, OSError, ValueError)

Row = dict[str, Any]


def parse_warc_date(value: str | None) -> dt.datetime | None:
    """WARC-Date (ISO 8601, ``Z`` or offset) as an aware UTC datetime; None when absent or invalid."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def content_type(value: str | None) -> tuple[str | None, str | None]:
    """``(mime, charset)`` of a Content-Type header value, lower-cased; None for what is absent."""
    if not value:
        return None, None
    parts = [p.strip() for p in value.split(";")]
    mime = parts[0].lower() or None
    charset = None
    for param in parts[1:]:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip(" \"'"):
            charset = val.strip(" \"'").lower()
    return mime, charset


def normalize_host(host: str) -> str:
    """A host as the filters compare it: lower case, no scheme, path, port or leading ``www.``."""
    host = host.strip().lower()
    if "://" in host:
        host = host_of(host) or ""
    host = host.split("/", 1)[0].split(":", 1)[0].rstrip(".")
    return host.removeprefix("www.")


@dataclass(frozen=True)
class RecordHead:
    """What the header filters look at: the WARC header and, for responses, the HTTP header."""

    rec_type: str
    record_id: str | None
    url: str | None
    crawled_at: dt.datetime | None
    status: str | None
    mime: str | None
    charset: str | None
    has_http: bool

    @property
    def host(self) -> str | None:
        return host_of(self.url)

    @classmethod
    def of(cls, record: ArcWarcRecord) -> RecordHead:
        headers = record.rec_headers
        http = record.http_headers
        mime, charset = content_type(http.get_header("Content-Type") if http else None)
        if mime is None:
            mime, _ = content_type(headers.get_header("WARC-Identified-Payload-Type"))
        return cls(
            rec_type=record.rec_type,
            record_id=headers.get_header("WARC-Record-ID"),
            url=clean_target_uri(headers.get_header("WARC-Target-URI")),
            crawled_at=parse_warc_date(headers.get_header("WARC-Date")),
            status=http.get_statuscode() if http else None,
            mime=mime,
            charset=charset,
            has_http=http is not None and bool(http.protocol),
        )


@dataclass(frozen=True)
class HeaderFilter:
    """Filters decided on headers alone. Hosts match themselves and their subdomains; the
    WARC-Date range is ``since <= WARC-Date < until`` (UTC)."""

    allow_hosts: frozenset[str] = frozenset()
    deny_hosts: frozenset[str] = frozenset()
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def check(self, head: RecordHead) -> tuple[str, str] | None:
        """``(reason, detail)`` when the record must be dropped, else None."""
        if head.rec_type != "response":
            return "not_response", f"WARC-Type {head.rec_type}"
        if head.url is None or norm_url(head.url) is None:
            return "bad_url", f"target URI {head.url!r} is not an http(s) URL"
        if not head.has_http or head.status is None:
            return "http_status", "no HTTP response header"
        if head.status != "200":
            return "http_status", f"HTTP status {head.status}"
        if head.mime is not None and head.mime not in HTML_MIMES:
            return "not_html", f"Content-Type {head.mime}"
        host = head.host
        if self.allow_hosts and not host_matches(host, self.allow_hosts):
            return "host", f"{host} not in the allow-list"
        if self.deny_hosts and host_matches(host, self.deny_hosts):
            return "host", f"{host} in the deny-list"
        if self.since or self.until:
            if head.crawled_at is None:
                return "warc_date", "no valid WARC-Date"
            if self.since and head.crawled_at < self.since:
                return "warc_date", f"WARC-Date {head.crawled_at.isoformat()} before {self.since.isoformat()}"
            if self.until and head.crawled_at >= self.until:
                return (
                    "warc_date",
                    f"WARC-Date {head.crawled_at.isoformat()} not before {self.until.isoformat()}",
                )
        return None


def _row(warc_file: str, offset: int | None, head: RecordHead | None = None, **values: Any) -> Row:
    row: Row = {
        "warc_file": warc_file,
        "warc_record_id": head.record_id if head else None,
        "record_offset": offset,
        "url": head.url if head else None,
        "host": head.host if head else None,
        "crawled_at": head.crawled_at if head else None,
        "payload": None,
        "charset": head.charset if head else None,
        "reason": None,
        "detail": None,
    }
    row.update(values)
    if row["detail"]:
        row["detail"] = " ".join(row["detail"].split())[:500]
    return row


def _read_payload(record: ArcWarcRecord) -> tuple[bytes | None, str | None]:
    """The decoded HTTP payload, or ``(None, why)`` when the record is truncated or unreadable.

    warcio does not raise on a record cut short (it returns what is there), so truncation is
    detected by the bytes still owed to the record's Content-Length after reading to the end.
    """
    try:
        payload = record.content_stream().read()
    except STREAM_ERRORS as exc:
        return None, f"payload unreadable: {type(exc).__name__}: {exc}"
    owed = getattr(record.raw_stream, "limit", 0)
    if owed:
        return None, f"record truncated: {owed} of {record.length} bytes missing"
    return payload, None


def _next_record_start(stream: BinaryIO, start: int, gzipped: bool) -> int | None:
    """Offset of the first readable WARC record after ``start``, or None at end of file.

    For gzip WARCs (one gzip member per record) this is the next gzip header whose first
    decompressed bytes are ``WARC/``; for plain WARCs, the next ``WARC/1.`` version line.
    """
    marker = GZIP_MAGIC if gzipped else b"WARC/1."
    pos = start
    while True:
        stream.seek(pos)
        block = stream.read(_RESYNC_BLOCK + 64)
        if not block:
            return None
        i = block.find(marker)
        while 0 <= i < _RESYNC_BLOCK:
            if not gzipped or _gzip_member_is_warc(block[i:]):
                return pos + i
            i = block.find(marker, i + 1)
        if len(block) <= _RESYNC_BLOCK:
            return None
        pos += _RESYNC_BLOCK


def _gzip_member_is_warc(data: bytes) -> bool:
    try:
        head = zlib.decompressobj(wbits=31).decompress(data, 16)
    except zlib.error:
        return False
    return head.startswith(b"WARC/")


def scan_stream(stream: BinaryIO, warc_file: str, header_filter: HeaderFilter) -> Iterator[Row]:
    """Rows of every record in one seekable WARC stream (see the module docstring)."""
    head = stream.read(1 << 16)
    stream.seek(0)
    gzipped = head.startswith(GZIP_MAGIC)
    if not (_gzip_member_is_warc(head) if gzipped else head.startswith(b"WARC/")):
        detail = "not a WARC file (ARC and other formats are not read)" if head else "empty file"
        log.warning("stage=scan shard=%s reason=unreadable_file %s", warc_file, detail)
        yield _row(warc_file, None, reason="unreadable_file", detail=detail)
        return
    last_offset: int | None = None
    while True:
        records = ArchiveIterator(stream)
        try:
            for record in records:
                last_offset = offset = records.offset
                yield _record_row(record, offset, warc_file, header_filter)
            break
        except STREAM_ERRORS as exc:
            start = records.offset
            resume = _next_record_start(stream, start + 1, gzipped)
            skipped = "to the end of the file" if resume is None else f"up to offset {resume}"
            detail = f"stream unreadable at offset {start}: {type(exc).__name__}: {exc}; skipped {skipped}"
            log.warning("stage=scan shard=%s offset=%d reason=corrupt_record %s", warc_file, start, detail)
            if start != last_offset:  # a record already counted is not counted twice
                last_offset = start
                yield _row(warc_file, start, reason="corrupt_record", detail=detail)
            if resume is None:
                break
            stream.seek(resume)


def _record_row(record: ArcWarcRecord, offset: int, warc_file: str, header_filter: HeaderFilter) -> Row:
    """The row of one record: rejected on its headers, corrupt, empty, or a candidate with its payload."""
    head = RecordHead.of(record)
    rejected = header_filter.check(head)
    if rejected:
        return _row(warc_file, offset, head, reason=rejected[0], detail=rejected[1])
    payload, problem = _read_payload(record)
    if problem:
        log.warning("stage=scan shard=%s offset=%d reason=corrupt_record %s", warc_file, offset, problem)
        return _row(warc_file, offset, head, reason="corrupt_record", detail=problem)
    if not payload:
        return _row(warc_file, offset, head, reason="empty", detail="empty HTTP payload")
    return _row(warc_file, offset, head, payload=payload)


def scan_file(
    uri: str,
    header_filter: HeaderFilter,
    opener: Callable[[str], BinaryIO] = storage.open_input,
) -> Iterator[Row]:
    """Rows of every record of the WARC file at ``uri`` (local or S3); never raises for bad input."""
    try:
        stream = opener(uri)
    except Exception as exc:  # any failure to open is this file's problem, not the job's
        detail = f"cannot open: {type(exc).__name__}: {exc}"
        log.warning("stage=scan shard=%s reason=unreadable_file %s", uri, detail)
        yield _row(uri, None, reason="unreadable_file", detail=detail)
        return
    with stream:
        seen = 0
        try:
            for row in scan_stream(stream, uri, header_filter):
                seen += 1
                yield row
        except Exception as exc:  # e.g. a network error mid-file on S3
            detail = f"read failed after {seen} records: {type(exc).__name__}: {exc}"
            log.warning("stage=scan shard=%s reason=unreadable_file %s", uri, detail)
            yield _row(uri, None, reason="unreadable_file", detail=detail)
