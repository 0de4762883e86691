"""jobs.ingest_wcep_html in Spark local mode on the real rendered day pages (JSON Lines archive and
RSS feed), a file of broken day pages and a truncated gzip file."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from jobs import ingest_wcep_html
from tests.table_checks import read_conforming
from udfs import storage, wcep, wcep_html
from udfs.schemas import SOURCE_REJECT_REASONS, SOURCE_REJECTED, WCEP_EVENTS

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wcep"
ARCHIVE = "wcep_portal_daily_html_2025-09_2026-08"
FEED = "wp_current_events_2026-08"
FILLER_LINES = 300
S3_DAYS = 12  # the archive's first days, before any day of the feed


def write_truncated_jsonl(path: Path) -> None:
    """A gzip JSON Lines file cut in the middle of its stream."""
    rng = random.Random(3)
    lines = [
        json.dumps(
            {
                "date": None,
                "title": f"Filler {n}",
                "html": "".join(rng.choice("abcdefgh ") for _ in range(400)),
            }
        )
        for n in range(FILLER_LINES)
    ]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture(scope="module")
def archive(shared_data) -> dict[date, dict]:
    with gzip.open(shared_data / "wcep" / f"{ARCHIVE}.jsonl.gz", "rt", encoding="utf-8") as f:
        return {date.fromisoformat(r["date"]): r for r in map(json.loads, f)}


@pytest.fixture(scope="module")
def html_run(spark, shared_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wcep_html")
    write_truncated_jsonl(tmp / "truncated_days.jsonl.gz")
    inputs = [
        str(shared_data / "wcep" / f"{ARCHIVE}.jsonl.gz"),
        str(shared_data / "wcep" / f"{FEED}.rss"),
        str(FIXTURES / "damaged_days.jsonl"),
        str(tmp / "truncated_days.jsonl.gz"),
    ]
    root = str(tmp / "root")
    summary = ingest_wcep_html.run(ingest_wcep_html.Config(root=root, inputs=inputs), spark)
    return root, summary


def test_every_day_in_the_samples_yields_its_events(html_run, archive):
    events = WCEP_EVENTS.read(html_run[0]).to_pylist()
    by_day: dict[date, list[dict]] = {}
    for event in events:
        by_day.setdefault(event["date"], []).append(event)
    assert set(by_day) == set(archive)
    for day, row in archive.items():
        written = sorted(by_day[day], key=lambda e: e["position"])
        _, parsed = wcep_html.parse_html_day(row["html"], day, row["title"])
        assert written == wcep.event_rows(day, parsed, "html"), day
    assert all(e["category"] for e in events)
    assert sum(bool(e["story_path"]) for e in events) > len(events) / 2
    assert [e["text"][:10] for e in events if not e["source_urls"]] == ["India wins"]
    assert len({e["event_id"] for e in events}) == len(events)  # feed days were not written twice


def test_broken_and_duplicate_day_pages_are_rejected(html_run):
    rejected = SOURCE_REJECTED.read(html_run[0]).to_pylist()
    assert {r["source"] for r in rejected} == {"wcep_html"}
    by_input = Counter((r["input"], r["reason"]) for r in rejected)
    # the feed repeats 15 archived days, captured at the same time; the tie goes to the feed
    assert by_input[(ARCHIVE, "duplicate_day")] == 15
    assert {(r["item"], r["reason"]) for r in rejected if r["input"] == "damaged_days"} == {
        (None, "malformed_record"),
        ("Current Events - June 20, 2026", "unknown_layout"),
        ("Current Events - June 21, 2026", "no_events"),
        ("Current Events - June 23, 2026", "date_mismatch"),
        ("Current Events - June 24, 2026", "empty_page"),
        ("Current Events - June 25, 2026", "bad_date"),
    }
    assert by_input[("truncated_days", "damaged_file")] == 1
    assert 0 < by_input[("truncated_days", "unknown_layout")] < FILLER_LINES


def test_summary_reconciles_with_the_tables(html_run):
    root, summary = html_run
    rejected = SOURCE_REJECTED.read(root).to_pylist()
    events = WCEP_EVENTS.read(root)
    assert summary.reconciles
    assert summary.rows_written == 285
    assert summary.rejected == Counter(r["reason"] for r in rejected)
    assert summary.rows_read == 285 + len(rejected)
    assert summary.metrics["events written"] == events.num_rows
    assert summary.metrics["days in layout html"] == 285
    assert storage.read_marker(WCEP_EVENTS.uri(root))["job"] == "ingest_wcep_html"


@pytest.mark.parametrize("spec", [WCEP_EVENTS, SOURCE_REJECTED], ids=lambda s: s.name)
def test_written_files_have_exactly_the_table_schema(html_run, spec):
    table = read_conforming(html_run[0], spec)
    if spec is SOURCE_REJECTED:
        assert set(table.column("reason").to_pylist()) <= set(SOURCE_REJECT_REASONS)
    else:
        assert set(table.column("source_format").to_pylist()) == {"html"}


def test_a_page_the_parser_fails_on_is_rejected_not_fatal(monkeypatch):
    def fail(*args):
        raise RecursionError("markup nested too deeply")

    monkeypatch.setattr(wcep_html, "parse_html_day", fail)
    record = {
        "file": "file:/x/days.jsonl.gz",
        "item": "Current Events - June 13, 2026",
        "date_hint": "2026-06-13",
        "captured": None,
        "html": "<div></div>",
        "_corrupt_record": None,
    }
    [row] = ingest_wcep_html.day_page_rows(record)
    assert row["reject"]["reason"] == "parse_error" and row["reject"]["input"] == "days"
    assert row["reject"]["detail"] == "RecursionError: markup nested too deeply"


def test_unknown_input_kinds_are_refused_before_any_work(tmp_path):
    stray = tmp_path / "days.csv"
    stray.write_text("date,html\n")
    with pytest.raises(ValueError, match="not a JSON Lines file"):
        ingest_wcep_html.run(ingest_wcep_html.Config(root=str(tmp_path / "root"), inputs=[str(stray)]))


@pytest.mark.s3
def test_inputs_and_root_on_s3(html_run, spark, shared_data, s3_root):
    """Inputs are read in the tasks and the tables written from them: nothing goes through the
    driver's disk (with no s3a, the executors write the Parquet files themselves). The archive's
    first days (a file a day partition each, so a few keep the S3 round trips short) and the
    broken pages give the rows the local run gives for them."""
    with gzip.open(shared_data / "wcep" / f"{ARCHIVE}.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(S3_DAYS)]
    days = {date.fromisoformat(json.loads(line)["date"]) for line in lines}
    archive = storage.join(s3_root, "inputs", f"{ARCHIVE}.jsonl.gz")
    storage.write_bytes(archive, gzip.compress("".join(lines).encode()))
    damaged = storage.join(s3_root, "inputs", "damaged_days.jsonl")
    storage.write_bytes(damaged, (FIXTURES / "damaged_days.jsonl").read_bytes())
    root = storage.join(s3_root, "root")
    summary = ingest_wcep_html.run(ingest_wcep_html.Config(root=root, inputs=[archive, damaged]), spark)
    assert summary.reconciles and summary.rows_written == len(days) == S3_DAYS
    assert storage.count_rows(WCEP_EVENTS.uri(root)) == summary.metrics["events written"]
    assert storage.count_rows(SOURCE_REJECTED.uri(root)) == summary.rows_rejected

    def by_id(rows: list[dict]) -> list[dict]:
        return sorted(rows, key=lambda r: r["event_id"])

    local = WCEP_EVENTS.read(html_run[0]).to_pylist()
    expected = by_id([e for e in local if e["date"] in days])
    assert expected and by_id(WCEP_EVENTS.read(root).to_pylist()) == expected
    rejected = [(r["input"], r["item"], r["reason"]) for r in SOURCE_REJECTED.read(root).to_pylist()]
    local_rejected = SOURCE_REJECTED.read(html_run[0]).to_pylist()
    assert Counter(rejected) == Counter(
        (r["input"], r["item"], r["reason"]) for r in local_rejected if r["input"] == "damaged_days"
    )


def test_a_file_gone_before_it_is_read_is_unreadable_not_damaged(spark, tmp_path, monkeypatch):
    """An input listed at the start but missing when its task opens it is one
    ``unreadable_file`` row naming the error; it is not taken for a damaged file."""
    gone = tmp_path / "gone_days.jsonl"
    listed = [
        *storage.expand_inputs([str(FIXTURES / "damaged_days.jsonl")]),
        storage.normalize_uri(str(gone)),
    ]
    monkeypatch.setattr(ingest_wcep_html.storage, "expand_inputs", lambda patterns: listed)
    root = str(tmp_path / "root")
    summary = ingest_wcep_html.run(ingest_wcep_html.Config(root=root, inputs=["ignored.jsonl"]), spark)
    [row] = [r for r in SOURCE_REJECTED.read(root).to_pylist() if r["input"] == "gone_days"]
    assert row["reason"] == "unreadable_file" and "FileNotFoundError" in row["detail"]
    assert summary.rejected["unreadable_file"] == 1 and "damaged_file" not in summary.rejected
