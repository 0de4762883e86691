"""Wikipedia dump → ``wiki_pages`` and, from the Current Events Portal day pages in it, ``wcep_events``.

    spark-submit jobs/ingest_wikipedia.py --root s3://bucket/augury enwiki-…-pages-articles.xml.bz2
    python -m jobs.ingest_wikipedia --root ./out dumps/*.xml.bz2

Spark's XML source splits the dump into ``<page>`` rows under an explicit schema (no inference
pass over a 20 GB file); one Python pass per page (``mapInArrow``) renders plain text with
mwparserfromhell and, for ``Portal:Current events/<YYYY> <Month> <D>`` pages, parses the event
bullets. Malformed pages, parse failures, day pages without events and damaged files become
``source_rejected`` rows; the job goes on and its counts reconcile.
"""

from __future__ import annotations

import argparse
import html
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType, StructField, StructType

from jobs import source_tables as st
from jobs.spark import corpus_session, spark_session, write_partitioned
from udfs import storage, wcep
from udfs.report import RunSummary
from udfs.schemas import WCEP_EVENTS, WIKI_PAGES
from udfs.wikitext import input_stem, parse_page, parse_timestamp

JOB = "ingest_wikipedia"
PAGES_SOURCE = "wiki_pages"
WCEP_SOURCE = "wcep_wikitext"
_TITLE = re.compile(r"<title>(.*?)</title>", re.DOTALL)

# The parts of a MediaWiki export <page> the job uses. Attributes are "_name", element text with
# attributes is "_VALUE". <revision> is a list so that history dumps parse too (the last one wins).
PAGE_XML = StructType(
    [
        StructField("title", StringType()),
        StructField("ns", IntegerType()),
        StructField("id", LongType()),
        StructField("redirect", StructType([StructField("_title", StringType())])),
        StructField(
            "revision",
            ArrayType(
                StructType(
                    [
                        StructField("id", LongType()),
                        StructField("timestamp", StringType()),
                        StructField("text", StructType([StructField("_VALUE", StringType())])),
                    ]
                )
            ),
        ),
        StructField("_corrupt_record", StringType()),
    ]
)


@dataclass
class Config:
    root: str  # output root URI (path, file:// or s3://)
    dumps: list[str]  # dump files or globs: .xml or .xml.bz2, local or s3:// / s3a://


def read_dump(spark: SparkSession, paths: list[str], damaged: bool) -> DataFrame:
    """One row per ``<page>``: the columns the parser needs plus the file it came from.

    The tokenizer-based XML parser (``useLegacyXMLParser``) is used on purpose: Spark 4's default
    streaming parser turns one malformed page into a corrupt record holding the rest of the file
    and drops every page after it, while this one isolates the malformed page and carries on.
    """
    xml = (
        spark.read.format("xml")
        .schema(PAGE_XML)
        .option("rowTag", "page")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
        .option("useLegacyXMLParser", "true")
        .option("ignoreCorruptFiles", str(damaged).lower())
        .load(paths)
    )
    revision = sf.element_at("revision", -1)
    return xml.select(
        sf.col("_metadata.file_path").alias("file"),
        "title",
        "ns",
        "id",
        sf.col("redirect._title").alias("redirect_title"),
        revision["id"].alias("revision_id"),
        revision["timestamp"].alias("revision_time"),
        revision["text"]["_VALUE"].alias("text"),
        "_corrupt_record",
    )


def page_rows(record: dict) -> list[dict]:
    """Parsed rows of one dump page: the page (or its rejection) and, for a portal day page, its
    events and day row (or the day's rejection)."""
    stem = input_stem(record["file"])
    title = record["title"]
    corrupt = record["_corrupt_record"]
    if corrupt is not None:
        named = _TITLE.search(corrupt)
        item = title or (html.unescape(named.group(1)) if named else None)
        return [st.reject_row(PAGES_SOURCE, stem, item, "malformed_xml", st.snippet(corrupt))]
    if record["id"] is None or not title or record["ns"] is None:
        return [st.reject_row(PAGES_SOURCE, stem, title, "missing_field", "page without id, title or ns")]
    revision_time = parse_timestamp(record["revision_time"])
    rows: list[dict] = []
    try:
        page = parse_page(record["text"], record["redirect_title"])
    except Exception as exc:  # a parser failure on one page must not stop the dump
        rows.append(st.reject_row(PAGES_SOURCE, stem, title, "parse_error", f"{type(exc).__name__}: {exc}"))
    else:
        rows.append(
            {
                "kind": st.PAGE,
                "input": stem,
                "page": {
                    "page_id": record["id"],
                    "title": title,
                    "ns": record["ns"],
                    "revision_id": record["revision_id"],
                    "revision_time": revision_time,
                    "is_redirect": page.is_redirect,
                    "redirect_target": page.redirect_target,
                    "lead": page.lead,
                    "sections": [vars(s) for s in page.sections],
                    "categories": page.categories,
                    "n_words": page.n_words,
                    "dump": stem,
                },
            }
        )
    if wcep.is_day_title(title):
        rows += _day_page_rows(record, stem, title, revision_time)
    return rows


def _day_page_rows(record: dict, stem: str, title: str, revision_time: datetime | None) -> list[dict]:
    """The events and day row of a portal day page, or its rejection."""
    if record["redirect_title"] is not None:
        return [
            st.reject_row(WCEP_SOURCE, stem, title, "redirect", f"redirects to {record['redirect_title']}")
        ]
    try:
        day, layout, events = wcep.parse_wikitext_day(title, record["text"])
    except wcep.DayPageError as exc:
        return [st.reject_row(WCEP_SOURCE, stem, title, exc.reason, exc.detail)]
    except Exception as exc:  # a parser failure on one day must not stop the dump
        return [st.reject_row(WCEP_SOURCE, stem, title, "parse_error", f"{type(exc).__name__}: {exc}")]
    return st.day_rows(stem, title, revision_time, day, layout, events, "wikitext")


def parse_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: dump pages in, ``PARSED`` rows out."""
    for batch in batches:
        yield from st.to_batches(row for record in batch.to_pylist() for row in page_rows(record))


def run(config: Config, spark: SparkSession | None = None) -> list[RunSummary]:
    """Ingest the dumps under ``config.root``; returns the wiki_pages and wcep_events summaries."""
    pages = RunSummary(f"{JOB}: wiki_pages")
    days = RunSummary(f"{JOB}: wcep_events (day pages)")
    inputs = storage.expand_inputs(config.dumps)
    spark = spark or spark_session("augury-ingest-wikipedia")
    with corpus_session(spark), tempfile.TemporaryDirectory(prefix="augury-dumps-") as staging:
        paths = st.spark_paths(spark, inputs, staging)
        parsed = st.parse_inputs(spark, read_dump, parse_batches, paths)
        try:
            page_rows_df = parsed.df.where(sf.col("kind") == st.PAGE).select("page.*")
            write_partitioned(page_rows_df, WIKI_PAGES, config.root)
            damaged = st.damaged_rejects(parsed, PAGES_SOURCE, input_stem)
            st.write_wcep(spark, parsed, config.root, WCEP_SOURCE, days, damaged)
        finally:
            parsed.df.unpersist()
    pages.rows_read = parsed.count(st.PAGE) + parsed.count(st.REJECT, PAGES_SOURCE) + len(damaged)
    pages.rows_written = parsed.count(st.PAGE)
    pages.rejected.update(parsed.reasons(PAGES_SOURCE))
    if damaged:
        pages.reject("damaged_file", len(damaged))
        pages.notes.append("a damaged file counts as one row read; the pages after its damage are lost")
    st.report(config.root, JOB, inputs, [(WIKI_PAGES, pages), (WCEP_EVENTS, days)])
    return [pages, days]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="output root: a path, file:// or s3:// URI")
    parser.add_argument("dumps", nargs="+", help="dump files or globs (.xml or .xml.bz2; local or s3://)")
    args = parser.parse_args(argv)
    run(Config(root=args.root, dumps=args.dumps))


if __name__ == "__main__":
    main()
