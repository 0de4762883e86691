"""Hand-made WARC records for tests of damaged, unusual or filtered input (real data lives in
``../shared/data/warc``)."""

from __future__ import annotations

import gzip
import uuid
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator


def record(
    url: str,
    body: bytes = b"<html><body><p>hello</p></body></html>",
    *,
    status: str = "200 OK",
    ctype: str | None = "text/html; charset=utf-8",
    date: str = "2022-09-15T10:00:00Z",
    rtype: str = "response",
    compress: bool = True,
) -> bytes:
    """One WARC response record (its own gzip member unless ``compress`` is False)."""
    http = f"HTTP/1.1 {status}\r\n".encode()
    if ctype:
        http += f"Content-Type: {ctype}\r\n".encode()
    block = http + b"\r\n" + body
    record_id = uuid.uuid5(uuid.NAMESPACE_URL, url + date)
    head = (
        f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Record-ID: <urn:uuid:{record_id}>\r\n"
        f"WARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
        f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n"
    ).encode()
    raw = head + block + b"\r\n\r\n"
    return gzip.compress(raw, mtime=0) if compress else raw


def copy_records(path: Path, indices: list[int]) -> bytes:
    """The raw bytes of some records of a real WARC file (in the order given), for splitting it
    into several files: with one gzip member per record, each slice is a valid WARC on its own."""
    data = path.read_bytes()
    with path.open("rb") as f:
        records = ArchiveIterator(f)
        starts = [records.offset for _ in records]
    ends = [*starts[1:], len(data)]
    return b"".join(data[starts[i] : ends[i]] for i in indices)
