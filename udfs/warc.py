"""Streaming WARC files and filtering their records on WARC and HTTP headers alone.

``scan_file`` turns one WARC file into rows: a *candidate* row (reason ``None``) carries the raw
HTML payload of a record that passed every header filter; every other record becomes a rejected
row with a reason from ``udfs.schemas.ARTICLE_REJECT_REASONS``. No HTML is parsed here, and the
payload of a record that fails a header filter is never read, so cheap filters (record type,
status, MIME, host allow-list) cost almost nothing.

Records are read with FastWARC (about 2.5× warcio's speed on gzip WARCs here; ``bench.ingest_news``
measures both). Neither library recovers from a damaged stream: warcio ends its iteration
silently at a bad gzip member, FastWARC raises. Recovery is done here, so a damaged file never
raises and nothing after the damage is lost:

* a record cut short (fewer payload bytes than its Content-Length) is ``corrupt_record``;
* a damaged stretch (a gzip member that does not decompress, junk between plain records, an
  iteration that stops before the end of the file) is one ``corrupt_record`` row at the offset
  where it starts, and reading resumes at the next gzip member (or ``WARC/1.`` line) where a
  WARC record really starts;
* a file that cannot be opened, is empty, holds an empty gzip stream or is no WARC is one
  ``unreadable_file`` row. Every file gives at least one row: one whose every byte is damaged
  gives one ``corrupt_record``.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from fastwarc.stream_io import BrotliReader, ChunkedReader, GzipReader
from fastwarc.warc import ArchiveIterator, WarcRecord

from udfs import storage
from udfs.urls import clean_target_uri, host_matches, host_of, norm_url

log = logging.getLogger("augury.warc")

HTML_MIMES = frozenset({"text/html", "application/xhtml+xml"})
GZIP_MAGIC = b"\x1f\x8b\x08"
_RESYNC_BLOCK = 1 << 20

# Errors FastWARC (and zlib, for the resync) raise on a damaged stream.
STREAM_ERRORS = (OSError, ValueError, EOFError, zlib.error)

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
    def of(cls, record: WarcRecord) -> RecordHead:
        """The head of a record whose HTTP header, if any, has been parsed (``parse_http``)."""
        headers = record.headers
        http = record.http_headers
        status = http.status_code if http is not None else None
        mime, charset = content_type(http.get("Content-Type") if http is not None else None)
        if mime is None:
            mime, _ = content_type(headers.get("WARC-Identified-Payload-Type"))
        return cls(
            rec_type=(headers.get("WARC-Type") or "").strip().lower(),
            record_id=headers.get("WARC-Record-ID"),
            url=clean_target_uri(headers.get("WARC-Target-URI")),
            crawled_at=parse_warc_date(headers.get("WARC-Date")),
            status=str(status) if status is not None else None,
            mime=mime,
            charset=charset,
            has_http=status is not None,
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


def _read_payload(record: WarcRecord) -> tuple[bytes | None, str | None]:
    """The decoded HTTP payload, or ``(None, why)`` when the record is truncated or unreadable.

    The reader returns what is there of a record cut short, so truncation is detected by the
    payload bytes still owed to the record's Content-Length; decoding (chunked transfer, gzip,
    deflate, brotli) comes after that check.
    """
    owed = record.content_length
    try:
        raw = record.reader.read()
    except STREAM_ERRORS as exc:
        return None, f"payload unreadable: {type(exc).__name__}: {exc}"
    if len(raw) < owed:
        block = record.headers.get("Content-Length")
        return None, f"record truncated: {owed - len(raw)} of {block} bytes missing"
    http = record.http_headers
    if http is None:
        return raw, None
    return decode_payload(raw, http.get("Transfer-Encoding"), http.get("Content-Encoding")), None


def decode_payload(raw: bytes, transfer_encoding: str | None, content_encoding: str | None) -> bytes:
    """The payload without its HTTP transfer and content encodings; a step that fails to decode
    keeps its input (a page mislabelled as gzip is still a page), as warcio does."""
    steps: list[Callable[[BinaryIO], Any]] = []
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        steps.append(ChunkedReader)
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("gzip", "x-gzip"):
        steps.append(GzipReader)
    elif encoding == "deflate":
        steps.append(lambda s: GzipReader(s, zlib=True))
    elif encoding == "br":
        steps.append(BrotliReader)
    data = raw
    for step in steps:
        try:
            data = step(io.BytesIO(data)).read()
        except STREAM_ERRORS:
            continue
    return data


def _next_record_start(stream: BinaryIO, start: int, gzipped: bool) -> int | None:
    """Offset of the first readable WARC record at or after ``start``, or None at end of file.

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


def _record_end(stream: BinaryIO, start: int, gzipped: bool) -> int | None:
    """Where the record (gzip member) starting at ``start`` ends, or None when it cannot be read
    to its end: the damage is inside it."""
    stream.seek(start)
    if gzipped:
        member, consumed = zlib.decompressobj(wbits=31), 0
        while not member.eof:
            chunk = stream.read(1 << 16)
            if not chunk:
                return None
            try:
                member.decompress(chunk)
            except zlib.error:
                return None
            consumed += len(chunk)
        return start + consumed - len(member.unused_data)
    length, head = None, 0
    while line := stream.readline(1 << 16):
        head += len(line)
        if not line.strip():
            break
        key, _, value = line.decode("latin-1").partition(":")
        if key.strip().lower() == "content-length" and value.strip().isdigit():
            length = int(value)
    return start + head + length + 4 if length is not None else None


def scan_stream(stream: BinaryIO, warc_file: str, header_filter: HeaderFilter) -> Iterator[Row]:
    """Rows of every record in one seekable WARC stream (see the module docstring)."""
    head = stream.read(1 << 16)
    gzipped = head.startswith(GZIP_MAGIC)
    problem = _not_a_warc(head)
    if problem:
        log.warning("stage=scan shard=%s reason=unreadable_file %s", warc_file, problem)
        yield _row(warc_file, None, reason="unreadable_file", detail=problem)
        return
    position: int | None = 0
    counted = None
    while position is not None:
        stream.seek(position)
        last, error = None, None
        try:
            for record in ArchiveIterator(stream, parse_http=False):
                last = counted = record.stream_pos
                yield _record_row(record, last, warc_file, header_filter)
        except STREAM_ERRORS as exc:
            error = f"{type(exc).__name__}: {exc}"
        damaged = position if last is None else _record_end(stream, last, gzipped)
        if damaged is None:  # the last record's own member is damaged: resume after it
            damaged = last
        resume = _next_record_start(stream, damaged + 1, gzipped) if error or gzipped else None
        if error is None and resume is None and last is not None:
            break  # a clean end: nothing readable follows
        skipped = "to the end of the file" if resume is None else f"up to offset {resume}"
        detail = (
            f"stream unreadable at offset {damaged}: {error or 'iteration ended early'}; skipped {skipped}"
        )
        log.warning("stage=scan shard=%s offset=%d reason=corrupt_record %s", warc_file, damaged, detail)
        if damaged != counted:  # a record already counted is not counted twice
            counted = damaged
            yield _row(warc_file, damaged, reason="corrupt_record", detail=detail)
        position = resume


def _not_a_warc(head: bytes) -> str | None:
    """Why a file whose first bytes are ``head`` is not read as a WARC, or None when it is one."""
    if not head:
        return "empty file"
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 16)
        except zlib.error as exc:
            return f"gzip stream unreadable at its start: {exc}"
        if not head:
            return "no WARC record: the gzip stream holds no data"
    return None if head.startswith(b"WARC/") else "not a WARC file (ARC and other formats are not read)"


def _record_row(record: WarcRecord, offset: int, warc_file: str, header_filter: HeaderFilter) -> Row:
    """The row of one record: rejected on its headers, corrupt, empty, or a candidate with its payload."""
    if not record.headers.get("WARC-Type") or record.headers.get("Content-Length") is None:
        detail = "record header incomplete: no WARC-Type or Content-Length"
        log.warning("stage=scan shard=%s offset=%d reason=corrupt_record %s", warc_file, offset, detail)
        return _row(warc_file, offset, RecordHead.of(record), reason="corrupt_record", detail=detail)
    if (record.headers.get("WARC-Type") or "").strip().lower() == "response":
        try:
            record.parse_http(quirks_mode=True)
        except STREAM_ERRORS as exc:
            detail = f"HTTP header unreadable: {type(exc).__name__}: {exc}"
            log.warning("stage=scan shard=%s offset=%d reason=corrupt_record %s", warc_file, offset, detail)
            return _row(warc_file, offset, RecordHead.of(record), reason="corrupt_record", detail=detail)
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
