"""Rendered Current Events Portal day pages → ``wcep_events`` (``source_format = "html"``).

    spark-submit jobs/ingest_wcep_html.py --root s3://bucket/augury s3://bucket/wcep/*.jsonl.gz
    python -m jobs.ingest_wcep_html --root ./out days.jsonl.gz wp_current_events.rss

Two input kinds, told apart by extension: JSON Lines (``.jsonl``, ``.ndjson``, ``.json``, optionally
``.gz``) with one day page per line (``date``, ``title``, ``html``, capture time ``rss_pubDate`` or
``commit_date``), and RSS 2.0 feeds (``.rss``, ``.xml``) whose items carry the rendered day page in
``description``. Each input file is one task that reads it through ``udfs.storage`` (a path or
S3, nothing staged on the driver) and parses its day pages (lxml, ``udfs.wcep``) into the same
event rows the dump reader makes from wikitext. When several inputs hold the same day,
the latest capture is kept and the others are rejected as ``duplicate_day``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import posixpath
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

import lxml.etree
import pyarrow as pa
from pyspark.sql import SparkSession

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


def file_rows(uri: str) -> Iterator[dict]:
    """Parsed rows of one input file, read here (in the task) through ``udfs.storage``: its day
    pages' events and day rows or rejections. A file that breaks off (a truncated gzip member, a
    feed cut mid-element) keeps the days before the break and adds a ``damaged_file`` row; one
    that cannot be opened at all is an ``unreadable_file`` row."""
    stem, name = input_stem(uri), posixpath.basename(uri)
    records = 0
    try:
        with (
            storage.open_input(uri) as raw,
            gzip.open(raw) if name.lower().endswith(".gz") else contextlib.nullcontext(raw) as stream,
        ):
            read = wcep_html.json_day_records if input_kind(uri) == "json" else wcep_html.feed_day_records
            for record in read(stream):
                records += 1
                yield from day_page_rows({"file": uri, **record})
    except (OSError, EOFError, zlib.error, lxml.etree.XMLSyntaxError) as exc:
        reason = "damaged_file" if records else "unreadable_file"
        yield st.reject_row(
            SOURCE, stem, name, reason, f"{uri} after {records} records: {type(exc).__name__}: {exc}"
        )


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
    """``mapInArrow`` body: input file URIs in, ``PARSED`` rows out."""
    for batch in batches:
        for uri in batch.column(0).to_pylist():
            yield from st.to_batches(file_rows(uri))


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Ingest the rendered day pages under ``config.root``; returns the day-page summary."""
    summary = RunSummary(f"{JOB}: wcep_events (day pages)")
    inputs = storage.expand_inputs(config.inputs)
    for uri in inputs:
        input_kind(uri)
    spark = spark or spark_session("augury-ingest-wcep-html")
    with corpus_session(spark):
        files = spark.createDataFrame(
            spark.sparkContext.parallelize([(u,) for u in inputs], len(inputs)), "uri string"
        )
        parsed = st.parse_frame(files, parse_batches)
        try:
            st.write_wcep(spark, parsed, config.root, SOURCE, summary)
        finally:
            parsed.df.unpersist()
    if summary.rejected["damaged_file"]:
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
