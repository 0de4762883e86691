"""Reading MediaWiki export dumps in pieces, so that one dump is parsed on every core.

A dump is split into **chunks**, byte ranges that a task reads on its own:

- a *multistream* dump (``…-pages-articles-multistream.xml.bz2``) is a concatenation of bz2
  streams of about 100 pages each; its index (``…-multistream-index.txt.bz2``, lines
  ``offset:page_id:title``) gives every stream's start, so the streams are grouped into chunks of
  whole streams and each stream is decompressed on its own — a damaged stream loses its own pages
  only, the next stream is read from its offset;
- a multistream *part file* (``…-multistream1.xml-p1p41242.bz2``) is a chunk of its own, or is
  split the same way when its index (``…-multistream-index1.txt-p1p41242.bz2``) is at hand;
- any other file (a plain ``.xml``, a single-stream ``.xml.bz2``, an ``.xml.gz``) is one chunk: bz2 cannot be
  entered in the middle of a stream.

Pages are cut from the decompressed bytes at ``<page>`` / ``</page>`` (element text is escaped
in an export, so the tags cannot occur inside it) and each page is parsed on its own: a malformed
page is a rejected row and the pages after it are read as usual. No chunk is ever held whole in
memory: bytes are read and decompressed in blocks of ``BLOCK`` bytes.
"""

from __future__ import annotations

import bz2
import html
import posixpath
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

BLOCK = 1 << 20  # bytes read (and decompressed) at a time
PAGE_OPEN, PAGE_CLOSE = b"<page>", b"</page>"
_TITLE = re.compile(rb"<title>(.*?)</title>", re.DOTALL)
_PART = re.compile(r"-multistream(\d*)\.xml(-p\d+p\d+)?\.bz2$")


class DumpDamageError(Exception):
    """A chunk could not be read to its end; ``pages`` pages came before the damage."""

    def __init__(self, message: str, pages: int) -> None:
        super().__init__(message)
        self.pages = pages


@dataclass(frozen=True)
class Chunk:
    """A byte range ``[start, end)`` of one dump (``end`` None: to the end of the file) and the
    offsets of the bz2 streams inside it (empty: decompress the range as one sequence)."""

    uri: str
    start: int
    end: int | None
    streams: tuple[int, ...] = ()


def is_index(uri: str) -> bool:
    """A multistream index (``…-multistream-index….txt….bz2``), not a dump."""
    return "-multistream-index" in posixpath.basename(uri)


def index_name(dump_uri: str) -> str | None:
    """The name the index of a multistream dump or part file has beside it (None: not multistream)."""
    folder, name = posixpath.split(dump_uri)
    found = _PART.search(name)
    if found is None:
        return None
    number, pages = found.group(1), found.group(2) or ""
    return posixpath.join(folder, f"{name[: found.start()]}-multistream-index{number}.txt{pages}.bz2")


def stream_offsets(lines: Iterator[str]) -> list[int]:
    """The sorted distinct stream offsets of an index's ``offset:page_id:title`` lines; blank
    lines are skipped, any other line that does not start with a number is a ``ValueError``."""
    offsets: set[int] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        head = line.split(":", 1)[0]
        if not head.isdigit():
            raise ValueError(f"line {n} is no 'offset:page_id:title' index line: {line[:80]!r}")
        offsets.add(int(head))
    return sorted(offsets)


def plan_chunks(uri: str, offsets: list[int], pieces: int) -> list[Chunk]:
    """Split a multistream dump into at most ``pieces`` chunks of whole streams (one chunk of the
    whole file without offsets). The last chunk runs to the end of the file, so the closing
    stream (``</mediawiki>``) is read too; the header stream before the first offset holds no page."""
    if not offsets:
        return [Chunk(uri, 0, None)]
    per = -(-len(offsets) // max(1, pieces))
    groups = [offsets[i : i + per] for i in range(0, len(offsets), per)]
    return [
        Chunk(uri, group[0], groups[n + 1][0] if n + 1 < len(groups) else None, tuple(group))
        for n, group in enumerate(groups)
    ]


def _limited(source: BinaryIO, length: int | None) -> Iterator[bytes]:
    """Blocks of ``source`` from its position, at most ``length`` bytes in all (None: to its end)."""
    left = length
    while left is None or left > 0:
        block = source.read(BLOCK if left is None else min(BLOCK, left))
        if not block:
            return
        if left is not None:
            left -= len(block)
        yield block


def _decompressed(blocks: Iterator[bytes], gzip: bool = False) -> Iterator[bytes]:
    """The bz2 streams (or gzip members) of compressed blocks, decompressed one after the other;
    zero bytes after the last one are padding. Data that ends inside a stream is an ``EOFError``."""
    decoder: Any = None  # None: between streams
    for block in blocks:
        while block:
            if decoder is None:
                if not block.strip(b"\0"):
                    break
                decoder = zlib.decompressobj(wbits=31) if gzip else bz2.BZ2Decompressor()
            out = decoder.decompress(block)
            if out:
                yield out
            block, decoder = (decoder.unused_data, None) if decoder.eof else (b"", decoder)
    if decoder is not None:
        raise EOFError("the compressed data ends inside a stream")


def pages_of(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The ``<page>…</page>`` slices of an export's bytes; text outside pages is skipped."""
    buffer = b""
    for block in blocks:
        buffer += block
        while True:
            start = buffer.find(PAGE_OPEN)
            if start < 0:
                buffer = buffer[-(len(PAGE_OPEN) - 1) :]
                break
            end = buffer.find(PAGE_CLOSE, start)
            if end < 0:
                buffer = buffer[start:]
                break
            yield buffer[start : end + len(PAGE_CLOSE)]
            buffer = buffer[end + len(PAGE_CLOSE) :]
    if PAGE_OPEN in buffer:
        raise EOFError("the data ends inside a <page> element")


def chunk_pages(chunk: Chunk, opener: Callable[[str], BinaryIO]) -> Iterator[bytes]:
    """Every page of a chunk, as XML bytes. A stream that fails to decompress raises
    ``DumpDamageError`` after the pages read before it — except in a chunk with known stream offsets,
    where reading resumes at the next stream and the damage is raised at the end."""
    codec = next((c for c in (".bz2", ".gz") if chunk.uri.endswith(c)), None)
    seen = 0
    damage: list[str] = []
    bounds = list(chunk.streams) or [chunk.start]
    ends = [*bounds[1:], chunk.end]
    with opener(chunk.uri) as source:
        for start, end in zip(bounds, ends, strict=True):
            source.seek(start)
            blocks = _limited(source, None if end is None else end - start)
            try:
                data = _decompressed(blocks, gzip=codec == ".gz") if codec else blocks
                for page in pages_of(data):
                    seen += 1
                    yield page
            except (OSError, EOFError, ValueError, zlib.error) as exc:
                where = f"stream at byte {start}" if chunk.streams else f"bytes from {start}"
                damage.append(f"{where}: {type(exc).__name__}: {exc}")
                if not chunk.streams:
                    break
    if damage:
        raise DumpDamageError(
            "; ".join(damage[:3]) + (f" (+{len(damage) - 3} more)" if len(damage) > 3 else ""), seen
        )


def _text(element: ET.Element | None) -> str | None:
    return None if element is None else element.text


def page_record(xml: bytes) -> dict:
    """The fields of one ``<page>`` the parser uses (the last revision wins); a malformed page is
    a record whose ``malformed`` names the error. ``text_state`` tells a page with no ``<text>``
    (``missing``) or removed text (``deleted``) from one with text (``ok``)."""
    try:
        page = ET.fromstring(xml)
    except ET.ParseError as exc:
        return _malformed(exc, xml)
    revisions = page.findall("revision")
    revision = revisions[-1] if revisions else None
    text = None if revision is None else revision.find("text")
    redirect = page.find("redirect")
    try:
        ns, page_id = _int(page.find("ns")), _int(page.find("id"))
        revision_id = _int(None if revision is None else revision.find("id"))
    except ValueError as exc:
        return _malformed(exc, xml)
    return {
        "malformed": None,
        "title": _text(page.find("title")),
        "ns": ns,
        "id": page_id,
        "redirect_title": None if redirect is None else redirect.get("title"),
        "revision_id": revision_id,
        "revision_time": _text(None if revision is None else revision.find("timestamp")),
        "text": None if text is None else (text.text or ""),
        "text_state": "missing" if text is None else ("deleted" if text.get("deleted") else "ok"),
    }


def _malformed(error: Exception, xml: bytes) -> dict:
    """A page that is no well-formed export page: the error, the page's start and its title if
    one can be read."""
    named = _TITLE.search(xml)
    title = html.unescape(named.group(1).decode("utf-8", "replace")) if named else None
    return {"malformed": f"{error}: {xml[:300].decode('utf-8', 'replace')}", "title": title}


def _int(element: ET.Element | None) -> int | None:
    if element is None or element.text is None:
        return None
    return int(element.text.strip())


def write_multistream(
    pages: Iterable[tuple[int, str, bytes]], dump: BinaryIO, index: BinaryIO, per_stream: int = 100
) -> int:
    """Write ``(page_id, title, page_xml)`` pages as a multistream dump and its index, the way
    Wikimedia packs them (a header stream, streams of ``per_stream`` pages, a closing stream), so
    that a single-stream export can be split over every core. Returns the number of streams."""
    header = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="en">\n'
    dump.write(bz2.compress(header))
    lines = bz2.BZ2Compressor()
    streams, group = 0, []
    for page in [*pages, None]:
        if page is not None:
            group.append(page)
        if group and (page is None or len(group) == per_stream):
            offset = dump.tell()
            dump.write(bz2.compress(b"".join(xml for _, _, xml in group)))
            index.write(lines.compress("".join(f"{offset}:{i}:{t}\n" for i, t, _ in group).encode()))
            streams, group = streams + 1, []
    dump.write(bz2.compress(b"</mediawiki>\n"))
    index.write(lines.flush())
    return streams
