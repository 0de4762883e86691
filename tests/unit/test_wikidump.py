"""udfs.wikidump: index names and offsets, chunk plans, page cutting across bz2 streams, damage
that loses only its own stream, and the fields of one page."""

from __future__ import annotations

import bz2
import gzip
import itertools
import random
from pathlib import Path

import pytest

from udfs import wikidump
from udfs.wikidump import Chunk, DumpDamageError

PAGES = 250


def opener(uri: str):  # the file opener chunk_pages is given
    return Path(uri).open("rb")


def page(n: int, text: str | None = None) -> bytes:
    body = text if text is not None else f"Page {n} text about the river and the vote."
    return (
        f"  <page>\n    <title>Page {n}</title>\n    <ns>0</ns>\n    <id>{1000 + n}</id>\n"
        f"    <revision>\n      <id>{n + 1}</id>\n      <timestamp>2024-01-01T00:00:00Z</timestamp>\n"
        f'      <text bytes="10" xml:space="preserve">{body}</text>\n    </revision>\n  </page>\n'
    ).encode()


def multistream(tmp_path: Path, n: int = PAGES, per_stream: int = 20) -> tuple[Path, list[int]]:
    dump = tmp_path / "enwiki-20240601-pages-articles-multistream.xml.bz2"
    index = tmp_path / "enwiki-20240601-pages-articles-multistream-index.txt.bz2"
    with dump.open("wb") as d, index.open("wb") as i:
        wikidump.write_multistream(((1000 + k, f"Page {k}", page(k)) for k in range(n)), d, i, per_stream)
    with bz2.open(index, "rt", encoding="utf-8") as lines:
        return dump, wikidump.stream_offsets(lines)


def titles(pages: list[bytes]) -> list[str]:
    return [wikidump.page_record(p)["title"] for p in pages]


def read_all(chunk: Chunk) -> list[bytes]:
    return list(wikidump.chunk_pages(chunk, opener))


def test_index_names_of_a_dump_and_of_a_part_file():
    assert wikidump.index_name("s3://d/enwiki-20240601-pages-articles-multistream.xml.bz2") == (
        "s3://d/enwiki-20240601-pages-articles-multistream-index.txt.bz2"
    )
    assert wikidump.index_name("/d/enwiki-20240601-pages-articles-multistream3.xml-p151574p311329.bz2") == (
        "/d/enwiki-20240601-pages-articles-multistream-index3.txt-p151574p311329.bz2"
    )
    assert wikidump.index_name("/d/enwiki-20240601-pages-articles.xml.bz2") is None
    assert wikidump.is_index("/d/enwiki-20240601-pages-articles-multistream-index.txt.bz2")


def test_stream_offsets_are_distinct_and_sorted_and_a_foreign_line_is_refused():
    assert wikidump.stream_offsets(iter(["600:1:A\n", "600:2:B:C\n", "\n", "90:3:D\n"])) == [90, 600]
    with pytest.raises(ValueError, match="line 2"):
        wikidump.stream_offsets(iter(["600:1:A\n", "<mediawiki>\n"]))


@pytest.mark.parametrize("pieces", [1, 3, 8, 100])
def test_a_plan_covers_every_stream_once_in_order(pieces):
    offsets = list(range(500, 5500, 100))
    chunks = wikidump.plan_chunks("d.xml.bz2", offsets, pieces)
    assert len(chunks) <= pieces and [o for c in chunks for o in c.streams] == offsets
    assert all(a.end == b.start for a, b in itertools.pairwise(chunks)) and chunks[-1].end is None
    assert wikidump.plan_chunks("d.xml", [], pieces) == [Chunk("d.xml", 0, None)]


@pytest.mark.parametrize("pieces", [1, 4, 13])
def test_the_chunks_of_a_multistream_dump_yield_every_page_once(tmp_path, pieces):
    dump, offsets = multistream(tmp_path)
    assert len(offsets) == PAGES // 20 + 1
    pages = [p for c in wikidump.plan_chunks(str(dump), offsets, pieces) for p in read_all(c)]
    assert titles(pages) == [f"Page {n}" for n in range(PAGES)]


def test_a_damaged_stream_loses_only_its_own_pages(tmp_path):
    dump, offsets = multistream(tmp_path)
    data = bytearray(dump.read_bytes())
    middle = (offsets[3] + offsets[4]) // 2
    data[middle : middle + 32] = bytes(32)
    dump.write_bytes(bytes(data))
    (chunk,) = wikidump.plan_chunks(str(dump), offsets, 1)
    got: list[bytes] = []
    with pytest.raises(DumpDamageError, match=f"stream at byte {offsets[3]}") as caught:
        for p in wikidump.chunk_pages(chunk, opener):
            got.append(p)
    assert titles(got) == [f"Page {n}" for n in range(PAGES) if not 60 <= n < 80]
    assert caught.value.pages == len(got)


def test_a_truncated_single_stream_keeps_the_pages_before_the_damage(tmp_path):
    rng = random.Random(3)
    noise = " ".join(str(rng.random()) for _ in range(400))
    data = bz2.compress(b"<mediawiki>\n" + b"".join(page(n, noise) for n in range(200)) + b"</mediawiki>")
    path = tmp_path / "cut.xml.bz2"
    path.write_bytes(data[: len(data) * 2 // 3])
    got: list[bytes] = []
    with pytest.raises(DumpDamageError) as caught:
        for p in wikidump.chunk_pages(Chunk(str(path), 0, None), opener):
            got.append(p)
    assert 0 < caught.value.pages == len(got) < 200
    assert titles(got) == [f"Page {n}" for n in range(len(got))]


@pytest.mark.parametrize(
    ("name", "data", "damaged"),
    [
        ("random.xml.bz2", random.Random(5).randbytes(3000), True),
        ("empty.xml", b"", False),
        ("no-pages.xml", b"<mediawiki><siteinfo><sitename>W</sitename></siteinfo></mediawiki>", False),
        ("crawl.warc.gz", gzip.compress(b"WARC/1.0\r\nWARC-Type: warcinfo\r\n\r\n", mtime=0), False),
        ("not-gzip.xml.gz", b"<mediawiki><page><title>A</title></page></mediawiki>", True),
    ],
    ids=lambda value: None if isinstance(value, str | bool) else "bytes",
)
def test_files_without_pages(tmp_path, name, data, damaged):
    path = tmp_path / name
    path.write_bytes(data)
    chunk = Chunk(str(path), 0, None)
    if damaged:
        with pytest.raises(DumpDamageError) as caught:
            read_all(chunk)
        assert caught.value.pages == 0
    else:
        assert read_all(chunk) == []


def test_page_fields_last_revision_redirect_and_missing_or_deleted_text():
    two = (
        b'<page><title>A &amp; B</title><ns>0</ns><id>7</id><redirect title="C" />'
        b"<revision><id>1</id><timestamp>2020-01-01T00:00:00Z</timestamp><text>old</text></revision>"
        b"<revision><id>2</id><timestamp>2021-01-01T00:00:00Z</timestamp><text>#REDIRECT [[C]]</text></revision>"
        b"</page>"
    )
    record = wikidump.page_record(two)
    assert record == {
        "malformed": None,
        "title": "A & B",
        "ns": 0,
        "id": 7,
        "redirect_title": "C",
        "revision_id": 2,
        "revision_time": "2021-01-01T00:00:00Z",
        "text": "#REDIRECT [[C]]",
        "text_state": "ok",
    }
    missing = wikidump.page_record(
        b"<page><title>T</title><ns>0</ns><id>1</id><revision><id>3</id></revision></page>"
    )
    deleted = wikidump.page_record(
        b'<page><title>T</title><ns>0</ns><id>1</id><revision><id>3</id><text deleted="deleted" /></revision></page>'
    )
    assert (missing["text_state"], missing["text"]) == ("missing", None)
    assert (deleted["text_state"], deleted["text"]) == ("deleted", "")


def test_a_malformed_page_names_its_error_and_title():
    record = wikidump.page_record(
        b"<page><title>Broken</title><ns>0</ns><id>1</id><text>a <b> c</text></page>"
    )
    assert record["title"] == "Broken" and "mismatched tag" in record["malformed"]
    record = wikidump.page_record(b"<page><title>Bad id</title><ns>0</ns><id>x1</id></page>")
    assert record["title"] == "Bad id" and "invalid literal" in record["malformed"]


def test_a_gzip_export_is_read_member_by_member_and_a_cut_one_is_damage(tmp_path):
    members = [gzip.compress(b"<mediawiki>\n" + page(0) + page(1)), gzip.compress(page(2) + b"</mediawiki>")]
    path = tmp_path / "export.xml.gz"
    path.write_bytes(b"".join(members))
    assert titles(read_all(Chunk(str(path), 0, None))) == ["Page 0", "Page 1", "Page 2"]
    path.write_bytes(members[0] + members[1][: len(members[1]) // 2])
    with pytest.raises(DumpDamageError) as caught:
        read_all(Chunk(str(path), 0, None))
    assert caught.value.pages == 2
