"""udfs.jsonl_articles: scanning JSON Lines files and mapping one record to an article row."""

from __future__ import annotations

import datetime as dt
import gzip
import json

from udfs.ids import stable_id
from udfs.jsonl_articles import FieldMap, article_row, scan_lines
from udfs.news_extract import text_hash
from udfs.urls import norm_url

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TEXT = (
    "The regional parliament voted on Tuesday to extend the emergency measures for another month, "
    "after a long debate about the cost of housing the families who lost their homes in the floods. "
    "The opposition asked for an independent review of how the relief money has been spent so far."
)


def row(record: object, line_no: int = 3, file: str = "s3://bucket/dumps/outlet-2015.jsonl.gz") -> dict:
    line = (
        record
        if isinstance(record, bytes)
        else (record if isinstance(record, str) else json.dumps(record)).encode()
    )
    scanned = {
        "warc_file": file,
        "warc_record_id": f"line:{line_no}",
        "record_offset": 120,
        "line_no": line_no,
        "line": line,
    }
    return article_row(scanned, FieldMap(host="outlet.example"), NOW)


def test_record_with_url_maps_like_the_warc_path():
    url = "https://www.outlet.example/2015/09/10/floods/?utm_source=feed"
    out = row(
        {"id": 42, "url": url, "title": " Floods  ", "text": TEXT, "published": "2015-09-10T21:30:00-05:00"}
    )
    assert out["canonical_url"] == norm_url(url) == "https://outlet.example/2015/09/10/floods"
    assert out["article_id"] == stable_id(out["canonical_url"]) and out["text_hash"] == text_hash(TEXT)
    assert out["warc_record_id"] == "42" and out["host"] == "outlet.example" and out["title"] == "Floods"
    assert out["published_at"] == dt.datetime(2015, 9, 11, 2, 30, tzinfo=dt.UTC)
    assert out["published_date"] == dt.date(2015, 9, 11) and out["date_source"] == "jsonl:published"
    assert out["language"] == "en" and out["extractor"] == "jsonl" and out.get("reason") is None


def test_paragraph_lists_are_joined_and_missing_urls_get_a_stable_stand_in():
    out = row({"id": "a b/c", "text": [TEXT[:150], "", TEXT[150:]]})
    assert out["text"] == TEXT[:150].strip() + "\n\n" + TEXT[150:].strip()
    assert out["url"] == out["canonical_url"] == "jsonl://outlet-2015/a%20b%2Fc"
    assert out["host"] == "outlet.example"  # from --host
    no_id = row({"text": TEXT}, line_no=7)
    assert no_id["url"] == "jsonl://outlet-2015/line-7" and no_id["warc_record_id"] == "line:7"


def test_dates_are_never_guessed():
    for published in (None, "", "sometime in September", "10:30 AM", "2999-01-01", 1441843200, "Sept 2015"):
        out = row({"url": "https://outlet.example/x", "text": TEXT, "published": published})
        assert out["published_at"] is None and out["published_date"] is None and out["date_source"] is None


def test_bad_records_become_reasons():
    cases = {
        '{"id": 1, "text": ': "parse_error",
        "[1, 2, 3]": "parse_error",
        '"just a string"': "parse_error",
        '{"text": {"body": "x"}}': "parse_error",
        '{"text": []}': "empty",
        '{"text": "   "}': "empty",
        '{"text": "Too short."}': "too_short",
        '{"url": "not a url", "text": "' + TEXT + '"}': "bad_url",
        '{"url": "ftp://outlet.example/x", "text": "' + TEXT + '"}': "bad_url",
    }
    for line, reason in cases.items():
        out = row(line)
        assert out["reason"] == reason, line
        assert out["detail"] and out["warc_file"].endswith(".jsonl.gz") and out["record_offset"] == 120
    assert row(b'{"text": "caf\xe9"}')["detail"].startswith("not UTF-8")


def test_scan_numbers_lines_skips_blanks_and_reads_gzip(tmp_path):
    body = b'{"a": 1}\n\n  \n{"b": 2}\r\n{"c": 3}'
    for name, data in (("plain.jsonl", body), ("packed.jsonl.gz", gzip.compress(body))):
        path = tmp_path / name
        path.write_bytes(data)
        rows = list(scan_lines(str(path)))
        assert [(r["line_no"], r["record_offset"], r["warc_record_id"]) for r in rows] == [
            (1, 0, "line:1"),
            (4, 13, "line:4"),
            (5, 23, "line:5"),
        ]
        assert rows[2]["line"] == b'{"c": 3}' and all(r["reason"] is None for r in rows)


def test_scan_isolates_damaged_and_empty_files(tmp_path):
    packed = gzip.compress(b"".join(b'{"n": %d, "pad": "%s"}\n' % (i, b"x" * 200) for i in range(200)))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    rows = list(scan_lines(str(cut)))
    assert rows[-1]["reason"] == "corrupt_record" and "stream unreadable after line" in rows[-1]["detail"]
    assert all(r["reason"] is None for r in rows[:-1]) and rows[:-1]
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    (only,) = scan_lines(str(empty))
    assert only["reason"] == "unreadable_file" and only["warc_record_id"] is None
    (missing,) = scan_lines(str(tmp_path / "missing.jsonl"))
    assert missing["reason"] == "unreadable_file" and missing["detail"].startswith("cannot open")
