"""jobs.ingest_news in Spark local mode on the real sample WARCs, on hand-made ones, and to S3."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from jobs.articles_table import rejected_shard
from jobs.ingest_news import Config, main, run, staged_records
from tests.table_checks import read_conforming
from tests.warc_fixtures import copy_records, record
from udfs import storage
from udfs.cli import parse
from udfs.schemas import ARTICLE_REJECT_REASONS, ARTICLES, ARTICLES_REJECTED

CCNEWS = "ccnews_2022-09_39records_reconstructed.warc.gz"
HOUSTON = "resiliparse_CC-NEWS-2016-10_houstonpress_clipped.warc.gz"
WGET = "dolma_wget_sample-0001.warc.gz"
UKWA = "ukwa_IAH-20080430204825-00000-blackbook-truncated.warc.gz"


def tables(root: str) -> tuple[list[dict], list[dict]]:
    return ARTICLES.read(root).to_pylist(), ARTICLES_REJECTED.read(root).to_pylist()


def of_file(rows: list[dict], name: str) -> list[dict]:
    return [r for r in rows if r["warc_file"].endswith("/" + name)]


@pytest.fixture(scope="module")
def news_run(spark, shared_data, tmp_path_factory):
    """One run with the default extractor over every sample WARC, shared by the tests below."""
    root = str(tmp_path_factory.mktemp("news"))
    summary = run(Config(inputs=[str(shared_data / "warc" / "*.warc.gz")], root=root), spark)
    articles, rejected = tables(root)
    return summary, root, articles, rejected


@pytest.mark.spark
def test_ccnews_yields_dated_articles(news_run):
    _, _, articles, _ = news_run
    ccnews = of_file(articles, CCNEWS)
    complete = [a for a in ccnews if a["title"] and len(a["text"]) >= 200 and a["published_at"]]
    assert len(complete) >= 35
    for a in complete:
        assert a["published_date"] == a["published_at"].date()
        assert a["date_source"] in ("jsonld", "meta", "time", "htmldate", "url")
        assert a["published_at"] <= a["crawled_at"] + dt.timedelta(days=1)
        assert a["published_at"] != a["crawled_at"] and a["extractor"] == "hybrid"
    assert {a["language"] for a in complete} >= {"en", "pt", "ru", "el", "es"}


@pytest.mark.spark
def test_truncated_record_is_isolated_and_counted(news_run):
    summary, _, articles, rejected = news_run
    assert not of_file(articles, HOUSTON)
    (row,) = of_file(rejected, HOUSTON)
    assert row["reason"] == "corrupt_record" and "truncated" in row["detail"]
    assert row["url"].startswith("http://www.houstonpress.com/")
    assert summary.rejected["corrupt_record"] == 1


@pytest.mark.spark
def test_wget_target_uris_are_plain_and_duplicates_keep_the_earliest(news_run):
    _, _, articles, rejected = news_run
    wget_articles, wget_rejected = of_file(articles, WGET), of_file(rejected, WGET)
    assert len(wget_articles) >= 10
    urls = [r["url"] for r in wget_articles + wget_rejected if r["url"]]
    assert len(urls) == 33 and all(u.startswith(("https://", "metadata://")) for u in urls)
    (allenai,) = [a for a in wget_articles if a["canonical_url"] == "https://allenai.org"]
    dups = [r for r in wget_rejected if r["reason"] == "duplicate_url"]
    assert len(dups) == 2 and {d["duplicate_of"] for d in dups} == {allenai["article_id"]}
    assert all(allenai["crawled_at"] < d["crawled_at"] for d in dups)


@pytest.mark.spark
def test_non_news_files_pass_through_with_reasons(news_run):
    _, _, articles, rejected = news_run
    ukwa = Counter(r["reason"] for r in of_file(rejected, UKWA))
    assert ukwa["bad_url"] == 1 and ukwa["not_html"] == 5 and ukwa["not_response"] == 15
    excerpt = Counter(r["reason"] for r in of_file(rejected, "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"))
    assert excerpt["not_response"] == 34  # its 16 HTML pages (spam, shops) are read like news
    assert len(of_file(articles, "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz")) + excerpt.total() == 50
    whirlwind = Counter(
        r["reason"] for r in of_file(rejected, "commoncrawl_whirlwind_CC-MAIN-2024-22.warc.gz")
    )
    assert whirlwind == {"not_response": 3}
    assert {r["reason"] for r in rejected} <= set(ARTICLE_REJECT_REASONS)


@pytest.mark.spark
def test_counts_reconcile_with_an_independent_count(news_run, shared_data):
    summary, _, articles, rejected = news_run
    n_records = 0
    for path in sorted((shared_data / "warc").glob("*.warc.gz")):
        with path.open("rb") as f:
            n_records += sum(1 for _ in ArchiveIterator(f))
    assert summary.rows_read == n_records == 152
    assert summary.rows_written == len(articles) > 0
    assert dict(summary.rejected) == Counter(r["reason"] for r in rejected)
    assert summary.reconciles and summary.rows_read == len(articles) + len(rejected)


@pytest.mark.spark
def test_written_files_have_exactly_the_table_schemas(news_run):
    _, root, _, _ = news_run
    for spec in (ARTICLES, ARTICLES_REJECTED):
        read_conforming(root, spec, file_nullability=True)


@pytest.mark.spark
def test_partitions_and_summary_marker(news_run):
    summary, root, articles, _ = news_run
    base = Path(storage.local_path(ARTICLES.uri(root)))
    dirs = {p.name for p in base.iterdir() if p.is_dir()}
    assert {
        "published_date=2022-09-15",
        "published_date=2022-09-18",
        "published_date=__HIVE_DEFAULT_PARTITION__",
    } <= dirs
    undated = [a for a in articles if a["published_date"] is None]
    assert undated and all(a["published_at"] is None and a["date_source"] is None for a in undated)
    for d in dirs:  # one writer per partition value: one file per date
        assert len(list((base / d).glob("*.parquet"))) == 1
    marker = storage.read_marker(ARTICLES.uri(root))
    assert marker["rows_read"] == summary.rows_read and marker["reconciles"] is True
    assert len(marker["input_files"]) == 6 and marker["config"]["extractor"] == "hybrid"


def exchanges(df) -> int:
    """Shuffles in a DataFrame's physical plan."""
    return df._jdf.queryExecution().executedPlan().toString().count("Exchange")


@pytest.mark.spark
def test_one_big_file_is_extracted_on_several_cores(spark, shared_data):
    from pyspark.sql.functions import spark_partition_id

    path = "file://" + str(shared_data / "warc" / CCNEWS)
    config = Config(inputs=[path], root="unused", extractor="trafilatura")
    staged = staged_records(spark, [path], config, dt.datetime.now(dt.UTC), 4, spread=True)
    counts = [r["count"] for r in staged.groupBy(spark_partition_id()).count().collect()]
    assert sum(counts) == 40 and len(counts) >= 3 and max(counts) <= 20
    assert exchanges(staged) == 1


@pytest.mark.spark
def test_many_files_are_extracted_where_they_are_read(spark, shared_data, tmp_path):
    """With at least as many files as cores, no raw page crosses the network: no shuffle before
    extraction, one task per file."""
    paths = []
    for i, indices in enumerate(([1, 2], [3, 4], [5])):
        paths.append(tmp_path / f"part-{i}.warc.gz")
        paths[-1].write_bytes(copy_records(shared_data / "warc" / CCNEWS, indices))
    files = ["file://" + str(p) for p in paths]
    staged = staged_records(
        spark, files, Config(inputs=files, root="unused"), dt.datetime.now(dt.UTC), 4, spread=False
    )
    assert exchanges(staged) == 0 and staged.rdd.getNumPartitions() == 3
    rows = staged.collect()
    assert len(rows) == 5 and all(r["reason"] is None and r["extractor"] == "hybrid" for r in rows)


BODY = (
    "The city council approved the new budget on Thursday after a debate that lasted more than six hours. "
    "Members argued over funding for schools, road repairs and the public library, and several residents "
    "spoke during the public comment period about rising property taxes and the cost of housing. "
    "The mayor said the plan balances the needs of every district while keeping the reserve fund intact."
)
OTHER = (
    "Heavy rain flooded several streets in the harbour district overnight, and the fire service pumped "
    "water out of basements until the early morning. Officials expect the river to crest on Saturday "
    "and asked residents near the old bridge to move their cars to higher ground before the weekend."
)
FRENCH = (
    "Le conseil municipal a approuvé jeudi le nouveau budget après un débat de plus de six heures. "
    "Les élus ont discuté du financement des écoles, de la réparation des routes et de la bibliothèque."
) * 2


def html(body: str, published: str | None = None) -> bytes:
    meta = f"<meta property='article:published_time' content='{published}'>" if published else ""
    return (
        f"<html lang='en'><head><title>Budget</title>{meta}</head>"
        f"<body><article><h1>Budget</h1><p>{body}</p></article></body></html>"
    ).encode()


@pytest.mark.spark
def test_filters_dedup_and_near_duplicates_on_hand_made_warc(spark, tmp_path):
    # Regression: importing news-please (Twisted) in the driver breaks pyspark.ml's Params
    # (AttributeError: __provides__), so near-duplicate marking must not use pyspark.ml.
    import newsplease  # noqa: F401

    stamp = "2022-09-15T{}:00:00Z".format
    path = tmp_path / "hand.warc.gz"
    path.write_bytes(
        record(
            "https://example-news.com/2022/09/15/budget", html(BODY, "2022-09-15T09:00:00Z"), date=stamp(10)
        )
        + record("https://www.example-news.com/2022/09/15/budget?utm_source=x", html(BODY), date=stamp(11))
        + record("https://city.example-news.com/budget-copy", html(BODY), date=stamp(12))
        + record(
            "https://example-news.com/2022/09/16/budget-update",
            html(BODY.replace("six hours", "seven hours"), "2022-09-16T09:00:00Z"),
            date=stamp(13),
        )
        + record("https://denied.example-news.com/x", html(BODY + " Denied."), date=stamp(14))
        + record("https://other.org/x", html(BODY + " Other."), date=stamp(14))
        + record("https://example-news.com/old", html(BODY + " Old."), date="2022-09-01T00:00:00Z")
        + record("https://example-news.com/fr", html(FRENCH), date=stamp(15))
        + record("https://example-news.com/missing", html(BODY), status="404 Not Found", date=stamp(15))
        + record("https://example-news.com/undated/story", html(OTHER), date=stamp(16))
    )
    summary = run(
        Config(
            inputs=[str(path)],
            root=str(tmp_path / "out"),
            extractor="trafilatura",
            allow_hosts=["example-news.com"],
            deny_hosts=["denied.example-news.com"],
            since="2022-09-10",
            until="2022-09-20",
            languages=["en"],
            near_duplicates=0.8,
        ),
        spark,
    )
    articles, rejected = tables(str(tmp_path / "out"))
    by_url = {a["url"].rsplit("/", 1)[1]: a for a in articles}
    assert set(by_url) == {"budget", "budget-update", "story"}
    first = by_url["budget"]
    assert by_url["budget-update"]["near_duplicate_of"] == first["article_id"]
    assert first["near_duplicate_of"] is None and by_url["story"]["near_duplicate_of"] is None
    assert by_url["story"]["published_date"] is None and first["published_date"] == dt.date(2022, 9, 15)
    got = Counter(r["reason"] for r in rejected)
    assert got == {
        "duplicate_url": 1,
        "duplicate_text": 1,
        "host": 2,
        "warc_date": 1,
        "language": 1,
        "http_status": 1,
    }
    assert {r["duplicate_of"] for r in rejected if r["reason"].startswith("duplicate")} == {
        first["article_id"]
    }
    assert summary.rows_read == 10 and summary.reconciles
    assert summary.metrics["articles marked near-duplicate"] == 1


@pytest.mark.spark
@pytest.mark.s3
def test_s3_round_trip_keeps_partitions(spark, shared_data, s3_root):
    import s3fs

    fs = s3fs.S3FileSystem(**storage.s3_filesystem_options())
    bucket = s3_root[len("s3://") :].split("/")[0]
    fs.put(str(shared_data / "warc" / CCNEWS), f"{bucket}/in/{CCNEWS}")
    storage.write_bytes(
        f"s3://{bucket}/in/list.txt", f"# CC-NEWS sample\ns3a://{bucket}/in/*.warc.gz\n".encode()
    )
    summary = run(
        Config(
            inputs=[],
            manifest=f"s3://{bucket}/in/list.txt",
            root=s3_root,
            allow_hosts=["npr.org"],
            extractor="trafilatura",
        ),
        spark,
    )
    articles, rejected = tables(s3_root)
    assert summary.rows_written == len(articles) >= 2 and summary.reconciles
    assert {a["published_date"] for a in articles} == {dt.date(2022, 9, 18)}
    assert all(a["host"] == "npr.org" and a["warc_file"].startswith("s3://") for a in articles)
    assert Counter(r["reason"] for r in rejected)["host"] == 34
    keys = fs.find(f"{bucket}/root/corpus")
    assert any("/articles/published_date=2022-09-18/" in k and k.endswith(".parquet") for k in keys)
    shard = rejected_shard(f"s3://{bucket}/in/{CCNEWS}")
    assert any(f"/articles_rejected/shard={shard}/" in k and k.endswith(".parquet") for k in keys)
    assert storage.read_marker(ARTICLES.uri(s3_root))["rows_written"] == len(articles)


def parse_args(argv: list[str]) -> Config:
    return parse(Config, argv, "ingest_news")


def test_command_line_maps_to_config():
    config = parse_args(
        [
            "--root",
            "s3://b/r",
            "a.warc.gz",
            "b.warc.gz",
            "--allow-hosts",
            "npr.org, cnn.com",
            "--near-duplicates",
            "0.8",
        ]
    )
    assert list(config.inputs) == ["a.warc.gz", "b.warc.gz"] and config.root == "s3://b/r"
    assert list(config.allow_hosts) == ["npr.org", "cnn.com"] and config.near_duplicates == 0.8
    assert parse_args(["--root", "r", "--manifest", "m.txt"]).extractor == "hybrid"
    with pytest.raises(SystemExit):
        parse_args(["--root", "r"])
    for bad in (
        {"extractor": "nope"},
        {"near_duplicates": 1.5},
        {"since": "2022-09-20", "until": "2022-09-10"},
        {"since": "last week"},
        {"max_failure_rate": 2.0},
    ):
        with pytest.raises(ValueError):
            Config(inputs=["x"], root="r", **bad)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--since", "notadate", "x.warc.gz"],
            "argument --since: 'notadate' is not an ISO date or timestamp",
        ),
        (["--extractor", "nope", "x.warc.gz"], "argument --extractor: 'nope' is not one of hybrid"),
        (["--min-chars", "-5", "x.warc.gz"], "argument --min-chars: must be at least 0"),
        (["--partitions", "-1", "x.warc.gz"], "argument --partitions: must be at least 0"),
        (["--near-duplicates", "2", "x.warc.gz"], "argument --near-duplicates"),
        (["--max-failure-rate", "-0.1", "x.warc.gz"], "argument --max-failure-rate: must be at least 0"),
        (["--min-chars", "many", "x.warc.gz"], "argument --min-chars: invalid int value"),
        ([], "give WARC paths or globs, or --manifest"),
    ],
)
def test_bad_options_are_one_line_usage_errors(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(["--root", str(tmp_path / "out"), *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ingest_news: error: ") and message in err[-1], err


def test_bad_root_and_missing_inputs_are_refused_before_any_work(tmp_path, capsys):
    a_file = tmp_path / "root.txt"
    a_file.write_text("not a directory")
    warc = tmp_path / "in.warc.gz"
    warc.write_bytes(record("https://a.org/x"))
    for argv, message in (
        (["--root", str(a_file), str(warc)], "is a file, not a directory"),
        (["--root", str(tmp_path / "out"), str(tmp_path / "missing-*.warc.gz")], "matches no file"),
        (["--root", str(tmp_path / "out"), "ftp://host/x.warc.gz"], "unsupported URI scheme"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)  # no Spark session is started for these: the checks come first
        assert exit_.value.code == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("ingest_news: error: ") and message in line
    assert not (tmp_path / "out").exists()
