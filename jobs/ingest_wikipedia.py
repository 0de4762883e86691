"""Wikipedia dumps → ``wiki_pages`` and, from the Current Events Portal day pages in them, ``wcep_events``.

    spark-submit jobs/ingest_wikipedia.py --root s3://bucket/augury \
        s3://dumps/enwiki-20240601-pages-articles-multistream.xml.bz2
    python -m jobs.ingest_wikipedia --root ./out dumps/*.xml.bz2

Stages (named in the logs as ``stage=…``):

1. **plan** (driver): every dump becomes chunks (``udfs.wikidump``). A multistream dump whose
   index is among the inputs or beside it is split into ``CHUNKS_PER_CORE`` × cores chunks of
   whole bz2 streams (shared among the dumps); multistream part files and other dumps are one
   chunk each. Only the index offsets are held, never a page.
2. **parse** (one task per chunk, ``mapInArrow``): the chunk's streams are decompressed in
   blocks, cut into ``<page>`` elements and parsed one page at a time: plain text, sections and
   categories with mwparserfromhell, and for ``Portal:Current events/<YYYY> <Month> <D>`` pages
   the event bullets. A malformed page, a page without text, a parser failure, a day page
   without events, a damaged stream and a file with no page become ``source_rejected`` rows
   with their reasons; the job goes on and its counts reconcile.
3. **write**: pages by ``dump``, events by date, rejected rows by source and input.
"""

from __future__ import annotations

import bz2
import io
import logging
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from jobs import source_tables as st
from jobs.spark import corpus_session, spark_session, write_partitioned
from udfs import storage, wcep, wikidump
from udfs.cli import InputError, option, run_cli
from udfs.layout import Layout
from udfs.report import RunSummary
from udfs.schemas import WCEP_EVENTS, WIKI_PAGES
from udfs.wikitext import input_stem, parse_page, parse_timestamp

log = logging.getLogger("augury.ingest_wikipedia")

JOB = "ingest_wikipedia"
PAGES_SOURCE = "wiki_pages"
WCEP_SOURCE = "wcep_wikitext"
CHUNKS_PER_CORE = 4  # chunks of a split dump per core: enough to even out uneven streams
CHUNKS = StructType(
    [
        StructField("uri", StringType()),
        StructField("start", LongType()),
        StructField("end", LongType()),
        StructField("streams", ArrayType(LongType())),
    ]
)


@dataclass(frozen=True)
class Config:
    """Everything one run needs; every field is also a command-line option."""

    root: str = option(help="output root URI (a path, file:// or s3://); must not be a file")
    dumps: list[str] = option(
        positional=True,
        help="dump files or globs (.xml, .xml.bz2, multistream part files; local, file://, s3://); "
        "a multistream index among them or beside its dump splits that dump over every core",
    )


# ---------------------------------------------------------------- plan


def plan(inputs: list[str], cores: int) -> list[wikidump.Chunk]:
    """The chunks of every dump. Indexes are looked for among the inputs, then beside the dump;
    an index that does not parse or does not fit its dump is an ``InputError``."""
    indexes = {posixpath.basename(u): u for u in inputs if wikidump.is_index(u)}
    dumps = [u for u in inputs if not wikidump.is_index(u)]
    if not dumps:
        raise InputError("no dump among the inputs (only multistream indexes)")
    pieces = max(1, -(-CHUNKS_PER_CORE * cores // len(dumps)))
    chunks: list[wikidump.Chunk] = []
    for dump in dumps:
        index = wikidump.index_name(dump)
        if index is not None:
            index = indexes.get(posixpath.basename(index)) or (index if storage.exists(index) else None)
        offsets = _offsets(dump, index) if index else []
        chunks += wikidump.plan_chunks(dump, offsets, pieces)
        log.info(
            "stage=plan %s: %d chunk(s)%s",
            dump,
            len(chunks) - sum(c.uri != dump for c in chunks),
            f" from {len(offsets)} streams in {index}" if index else "",
        )
    return chunks


def _offsets(dump: str, index: str) -> list[int]:
    """The stream offsets of ``dump`` from its index, checked against the dump's size."""
    try:
        with storage.open_input(index) as raw, io.TextIOWrapper(bz2.open(raw), encoding="utf-8") as lines:
            offsets = wikidump.stream_offsets(lines)
        with storage.open_input(dump) as data:
            size = data.seek(0, io.SEEK_END)
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"index {index} of {dump} cannot be read: {exc}") from None
    if offsets and offsets[-1] >= size:
        raise InputError(
            f"index {index} names stream offset {offsets[-1]} past the end of {dump} ({size} bytes)"
        )
    return offsets


# ---------------------------------------------------------------- parse


def chunk_rows(chunk: wikidump.Chunk) -> Iterator[dict]:
    """Parsed rows of one chunk; a chunk that yields no page is itself a rejected row."""
    stem = input_stem(chunk.uri)
    name = posixpath.basename(chunk.uri)
    item = name if not chunk.streams else f"{name} bytes {chunk.start}-{chunk.end if chunk.end else 'end'}"
    pages = 0
    try:
        for xml in wikidump.chunk_pages(chunk, storage.open_input):
            pages += 1
            yield from page_rows({"file": chunk.uri, **wikidump.page_record(xml)})
    except wikidump.DumpDamageError as exc:
        reason = "damaged_file" if exc.pages else "unreadable_file"
        yield st.reject_row(PAGES_SOURCE, stem, item, reason, f"{chunk.uri}: {exc}")
        return
    except OSError as exc:
        yield st.reject_row(PAGES_SOURCE, stem, item, "unreadable_file", f"{chunk.uri}: {exc}")
        return
    if not pages:
        yield st.reject_row(
            PAGES_SOURCE, stem, item, "no_pages", "no <page> element: not a MediaWiki export?"
        )


def page_rows(record: dict) -> list[dict]:
    """Parsed rows of one dump page (``wikidump.page_record`` plus its ``file``): the page (or its
    rejection) and, for a portal day page, its events and day row (or the day's rejection)."""
    stem = input_stem(record["file"])
    title = record.get("title")
    if record["malformed"] is not None:
        return [st.reject_row(PAGES_SOURCE, stem, title, "malformed_xml", st.snippet(record["malformed"]))]
    if record["id"] is None or not title or record["ns"] is None:
        return [st.reject_row(PAGES_SOURCE, stem, title, "missing_field", "page without id, title or ns")]
    if record["text_state"] != "ok" or not record["text"].strip():
        why = {"missing": "no <text> element", "deleted": "the revision text was deleted"}
        return [
            st.reject_row(PAGES_SOURCE, stem, title, "no_text", why.get(record["text_state"], "empty text"))
        ]
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
    """``mapInArrow`` body: chunks in, ``PARSED`` rows out."""
    for batch in batches:
        for c in batch.to_pylist():
            chunk = wikidump.Chunk(c["uri"], c["start"], c["end"], tuple(c["streams"] or ()))
            yield from st.to_batches(chunk_rows(chunk))


def chunk_frame(spark: SparkSession, chunks: list[wikidump.Chunk]) -> DataFrame:
    """One partition per chunk, so that every chunk is a task of its own."""
    rows = [(c.uri, c.start, c.end, list(c.streams)) for c in chunks]
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), CHUNKS)


def input_files(config: Config) -> list[str]:
    """The dumps, checked before any work: a root that is a file, a pattern that matches nothing
    or an unsupported URI scheme is an ``InputError``."""
    Layout(config.root).check_root(must_exist=False)
    try:
        return storage.expand_inputs(config.dumps)
    except (FileNotFoundError, ValueError) as exc:
        raise InputError(str(exc)) from None


def run(config: Config, spark: SparkSession | None = None) -> list[RunSummary]:
    """Ingest the dumps under ``config.root``; returns the wiki_pages and wcep_events summaries."""
    inputs = input_files(config)
    pages = RunSummary(f"{JOB}: wiki_pages")
    days = RunSummary(f"{JOB}: wcep_events (day pages)")
    spark = spark or spark_session("augury-ingest-wikipedia")
    chunks = plan(inputs, spark.sparkContext.defaultParallelism)
    with corpus_session(spark):
        parsed = st.parse_frame(chunk_frame(spark, chunks), parse_batches)
        try:
            write_partitioned(
                parsed.df.where(sf.col("kind") == st.PAGE).select("page.*"), WIKI_PAGES, config.root
            )
            st.write_wcep(spark, parsed, config.root, WCEP_SOURCE, days)
        finally:
            parsed.df.unpersist()
    pages.rows_read = parsed.count(st.PAGE) + parsed.count(st.REJECT, PAGES_SOURCE)
    pages.rows_written = parsed.count(st.PAGE)
    pages.rejected.update(parsed.reasons(PAGES_SOURCE))
    pages.metrics["dumps"] = len({c.uri for c in chunks})
    pages.metrics["chunks (tasks)"] = len(chunks)
    pages.notes.append("rows read = pages seen + chunks that could not be read or held no page")
    st.report(config.root, JOB, inputs, [(WIKI_PAGES, pages), (WCEP_EVENTS, days)])
    return [pages, days]


def main(argv: list[str] | None = None) -> None:
    run_cli(Config, run, JOB, __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
