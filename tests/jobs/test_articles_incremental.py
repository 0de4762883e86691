"""Incremental ingestion (jobs.articles_table through jobs.ingest_news): batches of WARC files that
share dates, ingested one run after another, locally and to S3 without s3a.

The two input files are slices of the real CC-NEWS sample (its warcinfo record and some pages)
plus hand-made pages:

* ``a.warc.gz``: 6 real pages (2022-09-15, -16, -18) + a budget page (-17) + a flood page (-20)
* ``b.warc.gz``: 5 real pages (-15, -16, -18), one of them also in ``a`` (the "shared" page),
  + the budget text under another URL

Runs: ``a``, ``b``, ``a`` again, ``a`` with an allow-list that drops most of its hosts.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pytest

from jobs.articles_table import check_layout, rejected_shard
from jobs.ingest_news import Config, run
from tests.jobs.test_ingest_news import BODY, OTHER, html
from tests.warc_fixtures import copy_records, record
from udfs import storage
from udfs.report import RunSummary
from udfs.schemas import ARTICLES, ARTICLES_REJECTED

CCNEWS = "ccnews_2022-09_39records_reconstructed.warc.gz"
SHARED_URL = "https://chicago.suntimes.com/2022/9/15/23355194/indiana-refinery-to-pay-2-75-million-in-air-pollution-case"
NARROW = ["abc7.com", "chicago.suntimes.com"]
STEPS = (("a", "a", []), ("b", "b", []), ("a again", "a", []), ("a narrowed", "a", NARROW))


@pytest.fixture(scope="module")
def inputs(shared_data, tmp_path_factory) -> dict[str, str]:
    source = shared_data / "warc" / CCNEWS
    folder = tmp_path_factory.mktemp("incremental-in")
    a, b = folder / "a.warc.gz", folder / "b.warc.gz"
    a.write_bytes(
        copy_records(source, [0, 1, 3, 5, 13, 16, 31])
        + record(
            "https://example-news.com/2022/09/17/budget",
            html(BODY, "2022-09-17T09:00:00Z"),
            date="2022-09-17T10:00:00Z",
        )
        + record(
            "https://gone.example.net/2022/09/20/flood",
            html(OTHER, "2022-09-20T08:00:00Z"),
            date="2022-09-20T10:00:00Z",
        )
    )
    b.write_bytes(
        copy_records(source, [0, 2, 4, 5, 19, 32])
        + record("https://other-news.org/budget-copy", html(BODY), date="2022-09-19T10:00:00Z")
    )
    return {"a": storage.normalize_uri(str(a)), "b": storage.normalize_uri(str(b))}


State = tuple[RunSummary, list[dict], list[dict], list[str]]


def replay(spark, root: str, inputs: dict[str, str], steps) -> dict[str, State]:
    """Run the steps on ``root``; after each, the summary, both tables and the Parquet files."""
    states = {}
    for name, file, hosts in steps:
        summary = run(
            Config(inputs=[inputs[file]], root=root, extractor="trafilatura", allow_hosts=hosts), spark
        )
        articles, rejected = ARTICLES.read(root).to_pylist(), ARTICLES_REJECTED.read(root).to_pylist()
        states[name] = (
            summary,
            articles,
            rejected,
            storage.list_files(storage.join(root, "corpus"), ".parquet"),
        )
    return states


def day(n: int) -> dt.date:
    return dt.date(2022, 9, n)


@pytest.fixture(scope="module")
def local(spark, inputs, tmp_path_factory) -> tuple[str, dict[str, State]]:
    root = str(tmp_path_factory.mktemp("incremental-root"))
    return root, replay(spark, root, inputs, STEPS)


def key(row: dict) -> tuple:
    return (
        row["warc_file"],
        row.get("record_offset") or 0,
        row.get("reason") or "",
        row["warc_record_id"] or "",
    )


def rows_of(rows: list[dict], file: str) -> list[dict]:
    return sorted((r for r in rows if r["warc_file"] == file), key=key)


def by_date(rows: list[dict]) -> Counter:
    return Counter((r["published_date"], Path(r["warc_file"]).name) for r in rows)


@pytest.mark.spark
def test_every_run_reconciles(local):
    _, states = local
    for summary, _, _, _ in states.values():
        assert summary.reconciles and summary.rows_read in (9, 7)


@pytest.mark.spark
def test_a_later_file_keeps_the_articles_of_dates_it_shares(local, inputs):
    _, states = local
    _, after_a, _, _ = states["a"]
    summary_b, after_b, _, _ = states["b"]
    assert len(after_a) == 8 and summary_b.rows_written == 4
    assert rows_of(after_b, inputs["a"]) == rows_of(after_a, inputs["a"])  # untouched, row for row
    assert by_date(after_b) == by_date(after_a) + Counter(
        {(day(15), "b.warc.gz"): 1, (day(16), "b.warc.gz"): 1, (day(18), "b.warc.gz"): 2}
    )
    # b's rows are added as files of their own: none of a's rows or files is rewritten
    assert summary_b.metrics["articles of other files rewritten (they shared a file with replaced rows)"] == 0
    assert (
        summary_b.metrics["Parquet files replaced"] == 0 and summary_b.metrics["date partitions written"] == 3
    )


@pytest.mark.spark
def test_a_page_in_both_files_is_kept_once_and_the_later_copy_rejected(local, inputs):
    _, states = local
    _, articles, rejected, _ = states["b"]
    (shared,) = [a for a in articles if a["url"] == SHARED_URL]
    (budget,) = [a for a in articles if a["host"] == "example-news.com"]
    assert shared["warc_file"] == inputs["a"] and budget["warc_file"] == inputs["a"]
    dups = {r["reason"]: r for r in rows_of(rejected, inputs["b"]) if r["duplicate_of"]}
    assert dups["duplicate_url"]["url"] == SHARED_URL
    assert dups["duplicate_url"]["duplicate_of"] == shared["article_id"]
    assert dups["duplicate_text"]["url"] == "https://other-news.org/budget-copy"
    assert dups["duplicate_text"]["duplicate_of"] == budget["article_id"]
    assert all(d["detail"].endswith("already in the table from " + inputs["a"]) for d in dups.values())
    assert Counter(a["canonical_url"] for a in articles).most_common(1)[0][1] == 1


@pytest.mark.spark
def test_rejects_of_earlier_runs_survive_in_their_own_shards(local, inputs):
    root, states = local
    _, _, rejected_a, _ = states["a"]
    _, _, rejected_b, _ = states["b"]
    assert rows_of(rejected_b, inputs["a"]) == rows_of(rejected_a, inputs["a"]) != []
    assert Counter(r["reason"] for r in rows_of(rejected_b, inputs["b"])) == {
        "not_response": 1,
        "duplicate_url": 1,
        "duplicate_text": 1,
    }
    assert {r["shard"] for r in rejected_b} == {rejected_shard(inputs["a"]), rejected_shard(inputs["b"])}
    dirs = {p.name for p in Path(storage.local_path(ARTICLES_REJECTED.uri(root))).iterdir() if p.is_dir()}
    assert dirs == {f"shard={rejected_shard(inputs['a'])}", f"shard={rejected_shard(inputs['b'])}"}


@pytest.mark.spark
def test_rerunning_a_file_replaces_its_rows_and_changes_nothing(local):
    _, states = local
    first, _, _, _ = states["a"]
    again, articles, rejected, files = states["a again"]
    _, before_articles, before_rejected, before_files = states["b"]
    assert sorted(articles, key=key) == sorted(before_articles, key=key)
    assert sorted(rejected, key=key) == sorted(before_rejected, key=key)
    for field in ("rows_read", "rows_written", "rejected"):
        assert getattr(again, field) == getattr(first, field)
    assert again.metrics["articles replaced (earlier runs of these files)"] == 8
    # a's five files (one per date) and its shard were replaced; b's three files were not touched
    assert again.metrics["Parquet files replaced"] == 5
    assert len(files) == len(before_files) == 5 + 3 + 2 and files != before_files
    b_files = [f for f in before_files if "articles/" in f and f not in states["a"][3]]
    assert len(b_files) == 3 and set(b_files) <= set(files)


@pytest.mark.spark
def test_a_narrower_rerun_leaves_no_stale_rows(local, inputs):
    root, states = local
    summary, articles, rejected, _ = states["a narrowed"]
    _, before, _, _ = states["a again"]
    assert {a["host"] for a in rows_of(articles, inputs["a"])} == set(NARROW)
    assert rows_of(articles, inputs["b"]) == rows_of(before, inputs["b"])
    assert by_date(articles) == {
        (day(15), "a.warc.gz"): 2,
        (day(15), "b.warc.gz"): 1,
        (day(16), "b.warc.gz"): 1,  # a's agenciabrasil page is gone, b's stays
        (day(18), "a.warc.gz"): 1,
        (day(18), "b.warc.gz"): 2,
    }
    dirs = {p.name for p in Path(storage.local_path(ARTICLES.uri(root))).iterdir() if p.is_dir()}
    assert dirs == {f"published_date=2022-09-{day}" for day in (15, 16, 18)}  # -17 and -20 removed
    assert summary.metrics["date partitions emptied and removed"] == 2
    assert Counter(r["reason"] for r in rows_of(rejected, inputs["a"])) == {"host": 5, "not_response": 1}
    # The budget page left the table; b's copy of it stays rejected, and the summary says so.
    assert summary.metrics["duplicates elsewhere of articles removed by this run"] == 1
    assert inputs["b"] in summary.notes[0]


@pytest.mark.spark
@pytest.mark.s3
def test_s3_root_without_s3a_gives_the_same_tables(spark, inputs, local, s3_root):
    _, states = local
    steps = [s for s in STEPS if s[0] != "a again"]
    on_s3 = replay(spark, s3_root, inputs, steps)
    for name, _, _ in steps:
        summary, articles, rejected, _ = on_s3[name]
        local_summary, local_articles, local_rejected, _ = states[name]
        assert (
            summary.rows_written == local_summary.rows_written and summary.rejected == local_summary.rejected
        )
        assert sorted(articles, key=key) == sorted(local_articles, key=key), name
        assert sorted(rejected, key=key) == sorted(local_rejected, key=key), name
    import s3fs

    keys = s3fs.S3FileSystem(**storage.s3_filesystem_options()).find(s3_root[len("s3://") :])
    dates = {k.split("published_date=")[1].split("/")[0] for k in keys if "published_date=" in k}
    assert dates == {"2022-09-15", "2022-09-16", "2022-09-18"}


def test_a_root_in_the_old_rejected_layout_is_refused(tmp_path):
    (tmp_path / "corpus" / "articles_rejected" / "reason=host").mkdir(parents=True)
    with pytest.raises(ValueError, match="older layout"):
        check_layout(str(tmp_path))
    check_layout(str(tmp_path / "elsewhere"))  # an empty root is fine
