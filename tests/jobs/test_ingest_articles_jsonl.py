"""jobs.ingest_articles_jsonl in Spark local mode: the real reported.ly articles (local JSON Lines)
plus a hand-made gzip file of awkward records read from S3 (moto), ingested twice."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import uuid
from collections import Counter

import pytest

from jobs.ingest_articles_jsonl import Config, parse_args, run
from udfs import storage
from udfs.schemas import ARTICLES, ARTICLES_REJECTED

REPORTEDLY = "reportedly_articles_2015-09.json"
PARAGRAPHS = [
    "Rescue teams reached the villages cut off by the landslide on Saturday morning, two days after "
    "heavy rain washed away the only road into the valley.",
    "Local officials said about three hundred people had spent the nights in the school building and "
    "that helicopters would bring food and medicine until the road is repaired next week.",
]
UNDATED = (
    "The museum reopened its east wing after a renovation that took almost four years and cost more "
    "than the city had planned, and the first visitors queued for an hour to see the restored murals "
    "that had been hidden behind plaster since the nineteen fifties."
)
NO_ID = (
    "Farmers in the northern provinces began the harvest early this year because of the long dry "
    "summer, and the cooperative expects smaller yields of wheat and barley than in any of the last "
    "ten seasons, according to its spokesman on Friday."
)


def extra_lines(digest_text: str) -> list[str]:
    """Nine records and one blank line, one of each awkward kind."""
    return [
        json.dumps({"id": "rescue-1", "text": PARAGRAPHS, "published": "2015-09-10T12:00:00Z"}),
        '{"id": "broken", "text": ',
        "[1, 2, 3]",
        "",
        json.dumps({"id": "empty", "text": []}),
        json.dumps({"id": "short", "text": "Too short."}),
        json.dumps({"id": "museum", "text": UNDATED, "published": "sometime in autumn"}),
        json.dumps(
            {"id": "copy", "url": "https://reported.ly/2015/09/28/digest/?utm_source=x", "text": digest_text}
        ),
        json.dumps({"id": "bad-url", "url": "not a url", "text": UNDATED + " Again."}),
        json.dumps({"text": NO_ID, "published": "2015-09-12"}),
    ]


@pytest.fixture(scope="module")
def runs(spark, shared_data, s3_server, tmp_path_factory):
    """Two identical runs over both files; the summaries and the tables after each."""
    import s3fs

    local = shared_data / "wcep" / REPORTEDLY
    records = [json.loads(line) for line in local.read_text().splitlines()]
    (digest,) = [r for r in records if r["url"] == "https://reported.ly/2015/09/28/digest/"]
    bucket = f"augury-jsonl-{uuid.uuid4().hex[:8]}"
    fs = s3fs.S3FileSystem(**storage.s3_filesystem_options())
    fs.mkdir(bucket)
    extra = f"s3://{bucket}/in/extra.jsonl.gz"
    # s3fs, not storage.write_bytes: pyarrow's output stream would gzip a ".gz" key a second time.
    fs.pipe(extra, gzip.compress("\n".join(extra_lines(" ".join(digest["text"]))).encode()))
    root = str(tmp_path_factory.mktemp("jsonl-root"))
    config = Config(inputs=[str(local), f"s3a://{bucket}/in/*.jsonl.gz"], root=root, host="example.org")
    states = []
    for _ in range(2):
        summary = run(config, spark)
        states.append((summary, ARTICLES.read(root).to_pylist(), ARTICLES_REJECTED.read(root).to_pylist()))
    return records, extra, states


@pytest.mark.spark
@pytest.mark.s3
def test_reportedly_articles_are_dated_articles_with_text(runs):
    records, _, states = runs
    _, articles, _ = states[0]
    mine = [a for a in articles if a["warc_file"].endswith("/" + REPORTEDLY)]
    assert len(mine) == len(records) == 46
    by_id = {r["id"]: r for r in records}
    for a in mine:
        source = by_id[a["warc_record_id"]]
        assert a["text"] == "\n\n".join(p.strip() for p in source["text"] if p.strip())
        assert a["url"] == source["url"] and a["host"] == "reported.ly" and a["title"] == source["title"]
        assert a["published_at"] == dt.datetime.fromisoformat(source["published"])
        assert a["published_date"] == a["published_at"].date() and a["published_date"].month == 9
        assert a["date_source"] == "jsonl:published" and a["extractor"] == "jsonl" and a["language"] == "en"
    assert Counter(a["published_date"] for a in mine) == Counter(
        dt.date.fromisoformat(r["published"][:10]) for r in records
    )


@pytest.mark.spark
@pytest.mark.s3
def test_awkward_records_become_articles_or_reasons_and_counts_reconcile(runs):
    _, extra, states = runs
    summary, articles, rejected = states[0]
    assert summary.rows_read == 46 + 9 and summary.rows_written == 46 + 3 and summary.reconciles
    assert dict(summary.rejected) == {
        "parse_error": 2,
        "empty": 1,
        "too_short": 1,
        "duplicate_url": 1,
        "bad_url": 1,
    }
    assert Counter(r["reason"] for r in rejected) == summary.rejected
    assert {(r["warc_record_id"], r["reason"]) for r in rejected if r["reason"] == "parse_error"} == {
        ("line:2", "parse_error"),
        ("line:3", "parse_error"),
    }
    (copy,) = [r for r in rejected if r["reason"] == "duplicate_url"]
    (digest,) = [a for a in articles if a["canonical_url"] == "https://reported.ly/2015/09/28/digest"]
    assert copy["warc_file"] == extra and copy["duplicate_of"] == digest["article_id"]
    ours = {a["warc_record_id"]: a for a in articles if a["warc_file"] == extra}
    assert set(ours) == {"rescue-1", "museum", "line:10"}
    assert ours["rescue-1"]["url"] == "jsonl://extra/rescue-1" and ours["rescue-1"]["host"] == "example.org"
    assert ours["line:10"]["url"] == "jsonl://extra/line-10"
    assert ours["line:10"]["published_date"] == dt.date(2015, 9, 12)
    assert ours["museum"]["published_date"] is None and ours["museum"]["date_source"] is None
    assert summary.metrics["articles undated"] == 1


@pytest.mark.spark
@pytest.mark.s3
def test_rerun_is_idempotent(runs):
    _, _, [(first, articles, rejected), (second, again, rejected_again)] = runs

    def key(r):
        return (r["warc_file"], r["warc_record_id"], r.get("reason") or "")

    assert sorted(again, key=key) == sorted(articles, key=key)
    assert sorted(rejected_again, key=key) == sorted(rejected, key=key)
    assert (second.rows_read, second.rows_written, second.rejected) == (
        first.rows_read,
        first.rows_written,
        first.rejected,
    )
    assert second.metrics["articles replaced (earlier runs of these files)"] == first.rows_written


def test_command_line_maps_to_config():
    config = parse_args(
        [
            "--root",
            "out",
            "a.jsonl",
            "b.jsonl.gz",
            "--text-field",
            "body",
            "--host",
            "npr.org",
            "--min-chars",
            "50",
        ]
    )
    assert list(config.inputs) == ["a.jsonl", "b.jsonl.gz"] and config.text_field == "body"
    assert config.fields().host == "npr.org" and config.fields().min_chars == 50
    assert config.fields().published == "published" and config.id_field == "id"
    with pytest.raises(SystemExit):
        parse_args(["--root", "out"])
    for bad in ({"text_field": ""}, {"min_chars": -1}):
        with pytest.raises(ValueError):
            Config(inputs=["x"], root="r", **bad)
