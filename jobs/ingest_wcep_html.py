"""Rendered Current Events Portal day pages → ``wcep_events`` (``source_format = "html"``).

    spark-submit jobs/ingest_wcep_html.py --root s3://bucket/augury s3://bucket/wcep/*.jsonl.gz
    python -m jobs.ingest_wcep_html --root ./out days.jsonl.gz wp_current_events.rss

Two input kinds, told apart by extension: JSON Lines (``.jsonl``, ``.ndjson``, ``.json``, optionally
``.gz``) with one day page per line (``date``, ``title``, ``html``, capture time ``rss_pubDate`` or
``commit_date``), and RSS 2.0 feeds (``.rss``, ``.xml``) whose items carry the rendered day page in
``description``. Spark reads one row per day page; the parser (lxml, ``udfs.wcep``) turns it into
the same event rows the dump reader makes from wikitext. When several inputs hold the same day,
the latest capture is kept and the others are rejected as ``duplicate_day``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import StringType, StructField, StructType

from jobs import source_tables as st
from jobs.spark import corpus_session, spark_session
from udfs import storage, wcep, wcep_html
from udfs.report import RunSummary, log_to_stderr
from udfs.schemas import WCEP_EVENTS
from udfs.wikitext import input_stem

JOB = "ingest_wcep_html"
SOURCE = "wcep_html"
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
FEED_SUFFIXES = (".rss", ".xml")

DAY_JSON = StructType(
    [
        StructField("date", StringType()),
        StructField("title", StringType()),
        StructField("html", StringType()),
        StructField("rss_pubDate", StringType()),
        StructField("commit_date", StringType()),
        StructField("_corrupt_record", StringType()),
    ]
)
FEED_ITEM_XML = StructType(
    [
        StructField("title", StringType()),
        StructField("link", StringType()),
        StructField("description", StringType()),
        StructField("pubDate", StringType()),
        StructField("_corrupt_record", StringType()),
    ]
)


@dataclass
class Config:
    root: str  # output root URI (path, file:// or s3://)
    inputs: list[str]  # JSON Lines files and RSS feeds, or globs; local or s3:// / s3a://


def input_kind(path: str) -> str:
    """``json`` or ``feed`` from the file name; anything else is a usage error."""
    name = path.lower().removesuffix(".gz")
    if name.endswith(JSON_SUFFIXES):
        return "json"
    if name.endswith(FEED_SUFFIXES):
        return "feed"
    raise ValueError(
        f"{path}: not a JSON Lines file ({', '.join(JSON_SUFFIXES)}) or a feed ({', '.join(FEED_SUFFIXES)})"
    )


def read_days(spark: SparkSession, paths: list[str], damaged: bool) -> DataFrame:
    """One row per day page with the columns the parser needs, whatever the input kind."""
    ignore = str(damaged).lower()
    frames = []
    json_paths = [p for p in paths if input_kind(p) == "json"]
    feed_paths = [p for p in paths if input_kind(p) == "feed"]
    if json_paths:
        days = (
            spark.read.schema(DAY_JSON)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt_record")
            .option("ignoreCorruptFiles", ignore)
            .json(json_paths)
        )
        frames.append(
            days.select(
                sf.col("_metadata.file_path").alias("file"),
                sf.col("title").alias("item"),
                sf.col("date").alias("date_hint"),
                sf.coalesce("rss_pubDate", "commit_date").alias("captured"),
                "html",
                "_corrupt_record",
            )
        )
    if feed_paths:
        # The tokenizer-based XML parser keeps a malformed item to itself (see jobs.ingest_wikipedia).
        items = (
            spark.read.format("xml")
            .schema(FEED_ITEM_XML)
            .option("rowTag", "item")
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt_record")
            .option("useLegacyXMLParser", "true")
            .option("ignoreCorruptFiles", ignore)
            .load(feed_paths)
        )
        frames.append(
            items.select(
                sf.col("_metadata.file_path").alias("file"),
                sf.coalesce("title", "link").alias("item"),
                sf.lit(None).cast("string").alias("date_hint"),
                sf.col("pubDate").alias("captured"),
                sf.col("description").alias("html"),
                "_corrupt_record",
            )
        )
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def day_page_rows(record: dict) -> list[dict]:
    """Parsed rows of one rendered day page: its events and day row, or its rejection."""
    stem = input_stem(record["file"])
    item = record["item"]
    if record["_corrupt_record"] is not None:
        return [st.reject_row(SOURCE, stem, item, "malformed_record", st.snippet(record["_corrupt_record"]))]
    try:
        hint = date.fromisoformat(record["date_hint"]) if record["date_hint"] else None
    except ValueError:
        return [st.reject_row(SOURCE, stem, item, "bad_date", f"date field {record['date_hint']!r}")]
    try:
        day, events = wcep_html.parse_html_day(record["html"], hint, item)
    except wcep.DayPageError as exc:
        return [st.reject_row(SOURCE, stem, item, exc.reason, exc.detail)]
    except Exception as exc:  # a parser failure on one page must not stop the job
        return [st.reject_row(SOURCE, stem, item, "parse_error", f"{type(exc).__name__}: {exc}")]
    captured = wcep.parse_capture_time(record["captured"])
    return st.day_rows(stem, item or wcep.day_title(day), captured, day, "html", events, "html")


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: day pages in, ``PARSED`` rows out."""
    for batch in batches:
        yield from st.to_batches(row for record in batch.to_pylist() for row in day_page_rows(record))


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Ingest the rendered day pages under ``config.root``; returns the day-page summary."""
    summary = RunSummary(f"{JOB}: wcep_events (day pages)")
    inputs = storage.expand_inputs(config.inputs)
    for uri in inputs:
        input_kind(uri)
    spark = spark or spark_session("augury-ingest-wcep-html")
    with corpus_session(spark), tempfile.TemporaryDirectory(prefix="augury-wcep-") as staging:
        paths = st.spark_paths(spark, inputs, staging)
        parsed = st.parse_inputs(spark, read_days, parse_batches, paths)
        try:
            damaged = st.damaged_rejects(parsed, SOURCE, input_stem)
            st.write_wcep(spark, parsed, config.root, SOURCE, summary, damaged)
        finally:
            parsed.df.unpersist()
    if damaged:
        summary.rows_read += len(damaged)
        summary.reject("damaged_file", len(damaged))
        summary.notes.append("a damaged file counts as one row read; the days after its damage are lost")
    st.report(config.root, JOB, inputs, [(WCEP_EVENTS, summary)])
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="output root: a path, file:// or s3:// URI")
    parser.add_argument("inputs", nargs="+", help="JSON Lines files and RSS feeds, or globs (local or s3://)")
    args = parser.parse_args(argv)
    log_to_stderr()
    run(Config(root=args.root, inputs=args.inputs))


if __name__ == "__main__":
    main()
