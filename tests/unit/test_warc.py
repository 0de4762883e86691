"""udfs.warc on the real sample WARCs and on hand-made damaged or unusual ones."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import random
import zlib
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.warc_fixtures import copy_records, record
from udfs.schemas import ARTICLE_REJECT_REASONS
from udfs.warc import HeaderFilter, content_type, normalize_host, parse_warc_date, scan_file

UTC = dt.UTC


def scan(path: Path | str, header_filter: HeaderFilter | None = None) -> list[dict]:
    return list(scan_file(str(path), header_filter or HeaderFilter()))


def reasons(rows: list[dict]) -> Counter:
    return Counter(r["reason"] for r in rows)


# ---------------------------------------------------------------- real files


def test_ccnews_every_response_is_a_candidate_with_headers(shared_data):
    rows = scan(shared_data / "warc" / "ccnews_2022-09_39records_reconstructed.warc.gz")
    assert reasons(rows) == {None: 39, "not_response": 1}
    candidates = [r for r in rows if r["reason"] is None]
    assert all(b"<html" in r["payload"][:4096].lower() for r in candidates)
    assert all(r["crawled_at"].tzinfo is not None for r in candidates)
    assert candidates[0]["crawled_at"] == dt.datetime(2022, 9, 15, 23, 8, 29, tzinfo=UTC)
    assert candidates[0]["warc_record_id"].startswith("<urn:uuid:")
    offsets = [r["record_offset"] for r in rows]
    assert offsets == sorted(offsets) and offsets[0] == 0 and len(set(offsets)) == 40
    assert {r["host"] for r in candidates} >= {"npr.org", "chicago.suntimes.com", "1prime.ru"}


def test_truncated_houstonpress_record_is_one_corrupt_row(shared_data):
    rows = scan(shared_data / "warc" / "resiliparse_CC-NEWS-2016-10_houstonpress_clipped.warc.gz")
    assert len(rows) == 1
    (row,) = rows
    assert row["reason"] == "corrupt_record" and "truncated" in row["detail"]
    assert row["url"].startswith("http://www.houstonpress.com/") and row["payload"] is None


def test_wget_target_uris_come_out_plain(shared_data):
    path = shared_data / "warc" / "dolma_wget_sample-0001.warc.gz"
    assert b"WARC-Target-URI: <https://" in gzip.decompress(path.read_bytes())  # the quirk is really there
    rows = scan(path)
    urls = [r["url"] for r in rows if r["url"]]
    assert urls and not [u for u in urls if "<" in u or ">" in u]
    assert reasons(rows) == {None: 15, "not_response": 19}


def test_ukwa_dns_robots_and_images_are_rejected_on_headers(shared_data):
    rows = scan(shared_data / "warc" / "ukwa_IAH-20080430204825-00000-blackbook-truncated.warc.gz")
    by_url = {r["url"]: r for r in rows if r["reason"] != "not_response"}
    assert by_url["dns:www.archive.org"]["reason"] == "bad_url"
    assert by_url["http://www.archive.org/robots.txt"]["reason"] == "not_html"
    assert "text/plain" in by_url["http://www.archive.org/robots.txt"]["detail"]
    assert by_url["http://www.archive.org/images/logoc.jpg"]["reason"] == "not_html"
    assert by_url["http://www.archive.org/index.php"]["reason"] is None


def test_every_sample_record_is_accounted_for(shared_data):
    """One row per record warcio sees, for every sample file, with reasons from the fixed set."""
    for path in sorted((shared_data / "warc").glob("*.warc.gz")):
        rows = scan(path)
        with path.open("rb") as f:
            n_records = sum(1 for _ in ArchiveIterator(f))
        assert len(rows) == n_records, path.name
        assert set(reasons(rows)) - {None} <= set(ARTICLE_REJECT_REASONS)


# ---------------------------------------------------------------- header filters


def test_header_filters_on_hand_made_records(tmp_path):
    path = tmp_path / "mixed.warc.gz"
    path.write_bytes(
        record("https://edition.cnn.com/2022/09/15/a")  # subdomain of an allowed host
        + record("https://notcnn.com/c")  # suffix but not a subdomain
        + record("https://live.cnn.com/b")  # denied subdomain
        + record("https://cnn.com/gone", status="404 Not Found")
        + record("https://cnn.com/moved", status="301 Moved Permanently")
        + record("https://cnn.com/report.pdf", ctype="application/pdf")
        + record("https://cnn.com/no-type", ctype=None)  # no Content-Type: let the extractor decide
        + record("https://cnn.com/xhtml", ctype="application/xhtml+xml")
        + record("https://cnn.com/early", date="2022-09-14T23:59:59Z")
        + record("https://cnn.com/edge", date="2022-09-16T00:00:00Z")
        + record("https://cnn.com/empty", body=b"")
        + record("https://cnn.com/req", rtype="request")
    )
    hf = HeaderFilter(
        allow_hosts=frozenset({"cnn.com"}),
        deny_hosts=frozenset({"live.cnn.com"}),
        since=dt.datetime(2022, 9, 15, tzinfo=UTC),
        until=dt.datetime(2022, 9, 16, tzinfo=UTC),
    )
    got = {r["url"].rsplit("/", 1)[1]: (r["reason"], r["detail"]) for r in scan(path, hf)}
    assert got["a"] == (None, None)
    assert [got[k][0] for k in ("gone", "moved", "report.pdf", "no-type", "xhtml")] == [
        "http_status",
        "http_status",
        "not_html",
        None,
        None,
    ]
    assert "404" in got["gone"][1]
    assert got["b"][0] == "host" and "deny" in got["b"][1]
    assert got["early"][0] == "warc_date" and got["edge"][0] == "warc_date"
    assert got["empty"][0] == "empty" and got["req"][0] == "not_response"
    assert got["c"][0] == "host" and "allow-list" in got["c"][1]


def test_a_filtered_record_is_never_read(tmp_path):
    """The payload of a record dropped on its headers is not read: a truncated one is counted
    under its header reason, not as corrupt."""
    good = record("https://keep.org/a")
    cut = record("https://drop.org/b", body=b"x" * 5000)
    raw = gzip.decompress(cut)
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(good + gzip.compress(raw[: len(raw) - 3000], mtime=0))
    rows = scan(path, HeaderFilter(allow_hosts=frozenset({"keep.org"})))
    assert reasons(rows) == {None: 1, "host": 1}
    assert reasons(scan(path)) == {None: 1, "corrupt_record": 1}


# ---------------------------------------------------------------- damage


def test_corrupt_gzip_member_is_skipped_and_reading_resumes(tmp_path):
    first, second, third = record("https://a.org/1"), record("https://a.org/2"), record("https://a.org/3")
    damaged = second[:12] + bytes(40) + second[52:]
    path = tmp_path / "damaged.warc.gz"
    path.write_bytes(first + damaged + third)
    rows = scan(path)
    assert [(r["reason"], r["url"]) for r in rows] == [
        (None, "https://a.org/1"),
        ("corrupt_record", None),
        (None, "https://a.org/3"),
    ]
    assert rows[1]["record_offset"] == len(first)
    assert f"up to offset {len(first) + len(damaged)}" in rows[1]["detail"]
    assert rows[2]["record_offset"] == len(first) + len(damaged)


def test_junk_between_plain_records_is_skipped(tmp_path):
    first = record("https://a.org/1", compress=False)
    third = record("https://a.org/3", compress=False)
    path = tmp_path / "plain.warc"
    path.write_bytes(first + b"garbage that is not a record\r\n" * 3 + third)
    rows = scan(path)
    assert reasons(rows) == {None: 2, "corrupt_record": 1}
    assert rows[-1]["url"] == "https://a.org/3"


def test_file_truncated_mid_record_keeps_the_records_before(tmp_path):
    noise = random.Random(0).randbytes(20000)  # incompressible, so the cut lands inside record 2
    body = record("https://a.org/1") + record("https://a.org/2", body=b"<html>" + noise)
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(body[:-4000])
    rows = scan(path)
    assert [r["reason"] for r in rows] == [None, "corrupt_record"]


@pytest.mark.parametrize(
    ("name", "content"),
    [("not-a-warc.warc.gz", b"this is a text file, not a WARC\n" * 10), ("empty.warc.gz", b"")],
)
def test_unreadable_files_give_one_row(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    rows = scan(path)
    assert [r["reason"] for r in rows] == ["unreadable_file"]
    assert rows[0]["warc_file"] == str(path) and rows[0]["detail"]


def test_missing_file_gives_one_row(tmp_path):
    rows = scan(tmp_path / "nope.warc.gz")
    assert [r["reason"] for r in rows] == ["unreadable_file"] and "cannot open" in rows[0]["detail"]


# ---------------------------------------------------------------- small parsers


def test_content_type_and_dates_and_hosts():
    assert content_type('text/html; Charset="ISO-8859-1"') == ("text/html", "iso-8859-1")
    assert content_type("TEXT/HTML") == ("text/html", None)
    assert content_type(None) == (None, None)
    assert parse_warc_date("2022-09-15T23:08:29Z") == dt.datetime(2022, 9, 15, 23, 8, 29, tzinfo=UTC)
    assert parse_warc_date("2022-09-15T23:08:29.5+02:00") == dt.datetime(
        2022, 9, 15, 21, 8, 29, 500000, tzinfo=UTC
    )
    assert parse_warc_date("2022-09-15") == dt.datetime(2022, 9, 15, tzinfo=UTC)
    assert parse_warc_date("yesterday") is None and parse_warc_date(None) is None
    assert normalize_host(" https://WWW.NPR.org/sections ") == "npr.org"
    assert normalize_host("edition.cnn.com:443") == "edition.cnn.com"


# ---------------------------------------------------------------- recovery after damage, per member


def members_with_damage(shared_data: Path, damaged: int) -> tuple[bytes, list[int]]:
    """Five real CC-NEWS records, one gzip member each, with 64 bytes zeroed in the middle of
    member ``damaged``; returns the file's bytes and the member offsets."""
    source = shared_data / "warc" / "ccnews_2022-09_39records_reconstructed.warc.gz"
    parts = [copy_records(source, [i]) for i in range(1, 6)]
    broken = bytearray(parts[damaged])
    middle = len(broken) // 2
    broken[middle : middle + 64] = bytes(64)
    parts[damaged] = bytes(broken)
    offsets = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return b"".join(parts), offsets


def intact_by_warcio(data: bytes, offsets: list[int]) -> list[int]:
    """Offsets of the members warcio reads completely when it opens each at its own offset."""
    intact = []
    for offset in offsets:
        try:
            (rec,) = list(ArchiveIterator(io.BytesIO(data[offset:]), arc2warc=False))[:1]
            rec.content_stream().read()
            zlib.decompressobj(wbits=31).decompress(data[offset:])
        except Exception:
            continue
        intact.append(offset)
    return intact


def test_corrupt_middle_member_keeps_every_intact_record_after_it(shared_data, tmp_path):
    data, offsets = members_with_damage(shared_data, damaged=2)
    path = tmp_path / "middle.warc.gz"
    path.write_bytes(data)
    with path.open("rb") as f:  # warcio on the whole file stops at the damage
        assert len(list(ArchiveIterator(f))) < len(offsets)
    intact = intact_by_warcio(data, offsets)
    assert intact == [offsets[i] for i in (0, 1, 3, 4)]
    rows = scan(path)
    assert [r["record_offset"] for r in rows if r["reason"] is None] == intact
    (corrupt,) = [r for r in rows if r["reason"] == "corrupt_record"]
    assert corrupt["record_offset"] == offsets[2] and len(rows) == len(offsets)


def test_damage_between_members_is_one_row_and_reading_resumes(tmp_path):
    first, last = record("https://a.org/1"), record("https://a.org/2")
    junk_member = gzip.compress(b"this member is not a WARC record\r\n" * 5, mtime=0)
    path = tmp_path / "junk-member.warc.gz"
    path.write_bytes(first + junk_member + last)
    rows = scan(path)
    assert [(r["reason"], r["record_offset"]) for r in rows] == [
        (None, 0),
        ("corrupt_record", len(first)),
        (None, len(first) + len(junk_member)),
    ]
    path.write_bytes(first + bytes(100))  # trailing zeros after the last record
    assert [r["reason"] for r in scan(path)] == [None, "corrupt_record"]


@pytest.mark.parametrize(
    ("name", "content", "reason", "detail"),
    [
        ("random.warc.gz", random.Random(3).randbytes(5000), "unreadable_file", "not a WARC"),
        ("empty.warc.gz", b"", "unreadable_file", "empty file"),
        ("nothing.warc.gz", gzip.compress(b"", mtime=0), "unreadable_file", "holds no data"),
        ("header-only.warc", b"WARC/1.0\r\n\r\n", "corrupt_record", "header incomplete"),
        ("version-only.warc.gz", gzip.compress(b"WARC/", mtime=0), "corrupt_record", "Invalid WARC header"),
    ],
    ids=lambda value: None if isinstance(value, str) else "bytes",
)
def test_files_without_a_readable_record_give_one_row_with_the_reason(
    tmp_path, name, content, reason, detail
):
    path = tmp_path / name
    path.write_bytes(content)
    (row,) = scan(path)
    assert row["reason"] == reason and detail in row["detail"]


def test_http_encodings_are_decoded_after_the_truncation_check(tmp_path):
    html = b"<html><body><p>" + b"news " * 200 + b"</p></body></html>"
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (html[:100], html[100:])) + b"0\r\n\r\n"
    cases = {
        "gzip": (gzip.compress(html), "Content-Encoding: gzip"),
        "deflate": (zlib.compress(html), "Content-Encoding: deflate"),
        "chunked": (chunked, "Transfer-Encoding: chunked"),
        "mislabelled": (html, "Content-Encoding: gzip"),  # kept as it is, as warcio does
    }
    path = tmp_path / "encoded.warc.gz"
    path.write_bytes(
        b"".join(
            record(f"https://a.org/{name}", body, ctype=f"text/html\r\n{header}")
            for name, (body, header) in cases.items()
        )
    )
    rows = scan(path)
    assert [r["reason"] for r in rows] == [None] * 4 and all(r["payload"] == html for r in rows)


def test_payloads_are_the_ones_warcio_reads(shared_data):
    """FastWARC (the reader) and warcio give the same records and the same decoded payloads."""
    for path in sorted((shared_data / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            records, expected = ArchiveIterator(f), {}
            for r in records:
                if r.rec_type == "response":
                    expected[records.offset] = r.content_stream().read()
        for row in scan(path):
            if row["reason"] is None:
                assert row["payload"] == expected[row["record_offset"]], (path.name, row["url"])
