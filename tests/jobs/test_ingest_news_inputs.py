"""jobs.ingest_news on inputs built to break it: damaged and empty files, a host no resolver
would take, a run where most records fail, and the write path (salted files, shared files)."""

from __future__ import annotations

import gzip
import random
from collections import Counter
from pathlib import Path

import pytest

from jobs import articles_table
from jobs.ingest_news import Config, TooManyFailuresError, main, run
from tests.jobs.test_ingest_news import BODY, OTHER, html
from tests.warc_fixtures import copy_records, record
from udfs import storage
from udfs.schemas import ARTICLES, ARTICLES_REJECTED

CCNEWS = "ccnews_2022-09_39records_reconstructed.warc.gz"


def tables(root: Path) -> tuple[list[dict], list[dict]]:
    return ARTICLES.read(str(root)).to_pylist(), ARTICLES_REJECTED.read(str(root)).to_pylist()


def by_file(rows: list[dict]) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for r in rows:
        out.setdefault(Path(r["warc_file"]).name, Counter())[r.get("reason")] += 1
    return out


@pytest.mark.spark
def test_every_damaged_or_empty_file_is_accounted_for(spark, shared_data, tmp_path):
    source = shared_data / "warc" / CCNEWS
    parts = [copy_records(source, [i]) for i in range(1, 6)]
    broken = bytearray(parts[2])
    broken[len(broken) // 2 : len(broken) // 2 + 64] = bytes(64)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "middle.warc.gz").write_bytes(b"".join([*parts[:2], bytes(broken), *parts[3:]]))
    (folder / "random.warc.gz").write_bytes(random.Random(5).randbytes(4000))
    (folder / "empty.warc.gz").write_bytes(b"")
    (folder / "no-records.warc.gz").write_bytes(gzip.compress(b"", mtime=0))
    summary = run(Config(inputs=[str(folder / "*.warc.gz")], root=str(tmp_path / "out")), spark)
    articles, rejected = tables(tmp_path / "out")
    assert by_file(articles) == {"middle.warc.gz": Counter({None: 4})}  # every intact record
    assert by_file(rejected) == {
        "middle.warc.gz": Counter({"corrupt_record": 1}),
        "random.warc.gz": Counter({"unreadable_file": 1}),
        "empty.warc.gz": Counter({"unreadable_file": 1}),
        "no-records.warc.gz": Counter({"unreadable_file": 1}),
    }
    assert summary.rows_read == 8 and summary.reconciles


@pytest.mark.spark
def test_an_invalid_host_is_bad_url_and_does_not_displace_the_real_article(spark, tmp_path):
    path = tmp_path / "hosts.warc.gz"
    path.write_bytes(
        record("https://exa mple.com/a b", html(BODY), date="2022-09-15T08:00:00Z")  # crawled first
        + record("https://example.com/2022/09/15/budget", html(BODY), date="2022-09-15T09:00:00Z")
    )
    summary = run(Config(inputs=[str(path)], root=str(tmp_path / "out")), spark)
    articles, rejected = tables(tmp_path / "out")
    assert [a["host"] for a in articles] == ["example.com"]
    ((reason, url),) = [(r["reason"], r["url"]) for r in rejected]
    assert (reason, url) == ("bad_url", "https://exa mple.com/a b") and summary.reconciles


def damaged_records(n: int) -> bytes:
    """``n`` records, each its own gzip member with 16 bytes zeroed in the middle."""
    out = b""
    for i in range(n):
        member = bytearray(record(f"https://news.example.org/{i}", html(BODY + f" Story {i}.")))
        middle = len(member) // 2
        member[middle : middle + 16] = bytes(16)
        out += bytes(member)
    return out


@pytest.mark.spark
def test_a_run_where_most_records_fail_stops_before_writing(spark, tmp_path, capsys):
    path = tmp_path / "cut.warc.gz"
    path.write_bytes(damaged_records(3) + record("https://news.example.org/ok", html(OTHER)))
    root = tmp_path / "out"
    with pytest.raises(TooManyFailuresError, match=r"3 of 4 records .* damaged or were cut short"):
        run(Config(inputs=[str(path)], root=str(root)), spark)
    assert not storage.exists(ARTICLES.uri(str(root)))
    with pytest.raises(SystemExit) as exit_:
        main(["--root", str(root), str(path)])
    assert exit_.value.code == 1
    assert "--max-failure-rate" in capsys.readouterr().err
    summary = run(Config(inputs=[str(path)], root=str(root), max_failure_rate=0.8), spark)
    assert summary.rows_written == 1 and summary.rejected["corrupt_record"] == 3


@pytest.mark.spark
def test_a_date_is_written_by_several_tasks_and_reruns_rewrite_only_what_they_must(
    spark, tmp_path, monkeypatch
):
    monkeypatch.setattr(articles_table, "ROWS_PER_FILE", 2)
    a, b = tmp_path / "a.warc.gz", tmp_path / "b.warc.gz"
    texts = [f"{BODY} Item {i} of the day, on page {i}." for i in range(13)]
    a.write_bytes(
        b"".join(
            record(f"https://news.example.org/a{i}", html(t, "2022-09-15T09:00:00Z"))
            for i, t in enumerate(texts[:6])
        )
        + b"".join(record(f"https://news.example.org/u{i}", html(t)) for i, t in enumerate(texts[6:12]))
    )
    b.write_bytes(record("https://news.example.org/b0", html(texts[12], "2022-09-15T09:00:00Z")))
    root = tmp_path / "out"
    run(Config(inputs=[str(a), str(b)], root=str(root)), spark)
    base = Path(storage.local_path(ARTICLES.uri(str(root))))
    dated = list((base / "published_date=2022-09-15").glob("*.parquet"))
    undated = list((base / "published_date=__HIVE_DEFAULT_PARTITION__").glob("*.parquet"))
    assert len(dated) >= 2 and len(undated) >= 2  # 7 and 6 rows: 4 and 3 salted writer tasks
    before = sorted((r["article_id"], r["text"]) for r in ARTICLES.read(str(root)).to_pylist())

    # b's row shares files with a's rows (one run wrote both): rerunning b alone rewrites those
    # files, carrying a's rows over, and leaves the files of a alone untouched.
    b_files = {f for f in storage.list_files(str(base), ".parquet") if _holds(f, "b.warc.gz")}
    summary = run(Config(inputs=[str(b)], root=str(root)), spark)
    after = sorted((r["article_id"], r["text"]) for r in ARTICLES.read(str(root)).to_pylist())
    assert after == before and len(after) == 13
    assert summary.metrics["Parquet files replaced"] == len(b_files) == 1
    assert (
        0 < summary.metrics["articles of other files rewritten (they shared a file with replaced rows)"] <= 2
    )
    untouched = set(storage.list_files(str(base), ".parquet")) - b_files
    assert len(untouched) >= 5


def _holds(file_uri: str, name: str) -> bool:
    import pyarrow.parquet as pq

    return any(
        f.endswith(name)
        for f in pq.read_table(storage.local_path(file_uri), columns=["warc_file"]).column(0).to_pylist()
    )
