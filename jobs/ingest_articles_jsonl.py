"""News articles as JSON Lines → the ``articles`` table (and ``articles_rejected``), with Spark.

    spark-submit jobs/ingest_articles_jsonl.py --root s3://bucket/augury 's3://bucket/news/*.jsonl.gz'
    python -m jobs.ingest_articles_jsonl --root ./out ../shared/data/wcep/reportedly_articles_2015-09.json

Stages (``stage=…`` in the logs):

1. **scan**: one task per file streams its lines (local or S3, plain or gzip; ``udfs.jsonl_articles``).
   Reading in Python rather than with Spark's JSON source gives every record its line number and
   byte offset (record ids, stable tie-breaks) and keeps one damaged file from failing the job.
2. **spread**: the lines are hash-repartitioned on (file, offset) over all cores.
3. **map**: JSON → article row with the field mapping of ``Config``: ids, canonical URL, text hash
   and language exactly as the WARC path computes them, the publish date from the record's own
   field only (``date_source = "jsonl:<field>"``; missing or unparseable → undated).
4. **dedup + write**: ``jobs.articles_table.merge_and_write``, shared with ``jobs.ingest_news``: the
   run is authoritative for its input files (their earlier rows are replaced, rows of other files
   kept), duplicates are found against the table and within the run, and exactly the affected
   ``published_date`` partitions are rewritten. The summary is printed and saved as
   ``corpus/articles/_SUCCESS.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.articles_table import STAGED, merge_and_write
from jobs.source_tables import corpus_session
from jobs.spark import spark_session
from udfs import storage
from udfs.jsonl_articles import FieldMap, article_row, scan_lines
from udfs.report import RunSummary
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.ingest_articles_jsonl")

# Rows the scan stage emits: a line to map (reason null) or a rejected file / stream.
LINES = pa.schema(
    [
        pa.field("warc_file", pa.string()),
        pa.field("warc_record_id", pa.string()),
        pa.field("record_offset", pa.int64()),
        pa.field("line_no", pa.int64()),
        pa.field("line", pa.binary()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
SCAN_BATCH_BYTES = 32 << 20  # flush a scan batch at this many line bytes…
SCAN_BATCH_ROWS = 1000  # …or this many lines


@dataclass
class Config:
    """Everything one run needs; the command-line options map one to one."""

    inputs: list[str]
    root: str
    id_field: str = "id"
    url_field: str = "url"
    title_field: str = "title"
    text_field: str = "text"
    published_field: str = "published"
    language_field: str = "language"
    host: str | None = None  # host of records without a URL of their own
    min_chars: int = 200

    def fields(self) -> FieldMap:
        return FieldMap(
            id=self.id_field,
            url=self.url_field,
            title=self.title_field,
            text=self.text_field,
            published=self.published_field,
            language=self.language_field,
            host=self.host.strip().lower() if self.host else None,
            min_chars=self.min_chars,
        )

    def validate(self) -> None:
        names = (self.id_field, self.url_field, self.title_field, self.text_field)
        if not all(names) or not self.published_field or not self.language_field:
            raise ValueError("field names must not be empty")
        if self.min_chars < 0:
            raise ValueError("min_chars must not be negative")


def _scanner(files: list[str]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: file index → the lines of that file, in bounded batches."""

    def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                rows, size = [], 0
                for row in scan_lines(files[index]):
                    rows.append(row)
                    size += len(row["line"] or b"")
                    if size >= SCAN_BATCH_BYTES or len(rows) >= SCAN_BATCH_ROWS:
                        yield pa.RecordBatch.from_pylist(rows, schema=LINES)
                        rows, size = [], 0
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=LINES)

    return scan


def _mapper(fields: FieldMap, now: dt.datetime) -> Callable[[Iterator[pa.RecordBatch]], Iterator]:
    """mapInArrow function: lines → staged rows (rejected files and streams passed on)."""
    names = STAGED.names

    def to_articles(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                staged = row if row["reason"] else article_row(row, fields, now)
                out.append({k: staged.get(k) for k in names})
            yield pa.RecordBatch.from_pylist(out, schema=STAGED)

    return to_articles


def staged_records(
    spark: SparkSession, files: list[str], config: Config, now: dt.datetime, n_parts: int
) -> DataFrame:
    """scan → spread → map, as one lazy DataFrame of STAGED rows (one per line or bad file)."""
    lines = spark.range(len(files), numPartitions=len(files)).mapInArrow(
        _scanner(files), from_arrow_schema(LINES)
    )
    spread = lines.repartition(n_parts, "warc_file", "record_offset")
    return spread.mapInArrow(_mapper(config.fields(), now), from_arrow_schema(STAGED))


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Import the JSON Lines files of ``config`` into ``articles`` / ``articles_rejected``."""
    config.validate()
    summary = RunSummary(name="ingest_articles_jsonl")
    files = storage.expand_inputs(config.inputs)
    log.info("stage=plan %d JSON Lines files, root=%s", len(files), config.root)
    spark = spark or spark_session("augury-ingest-articles-jsonl")
    with corpus_session(spark):
        n_parts = max(4 * spark.sparkContext.defaultParallelism, len(files))
        staged = staged_records(spark, files, config, dt.datetime.now(dt.UTC), n_parts)
        staged.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summary.rows_read = staged.count()
            merge_and_write(spark, staged, files, config.root, n_parts, summary)
        finally:
            staged.unpersist()
    summary.metrics["JSON Lines files"] = len(files)
    summary.notes.append(
        "rows read = non-blank lines + files that could not be read + streams broken mid-file"
    )
    summary.finish()
    storage.mark_done(
        ARTICLES.uri(config.root),
        {**summary.to_dict(), "config": asdict(config), "input_files": files},
    )
    log.info("stage=done %s", summary.to_dict())
    return summary


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(prog="ingest_articles_jsonl", description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", help="JSON Lines files or globs (local, s3://, s3a://; .gz too)")
    p.add_argument("--root", required=True, help="output root URI (path, file://, s3://)")
    p.add_argument("--id-field", default="id", help="record id (default id); else the line number")
    p.add_argument("--url-field", default="url", help="article URL (default url); else jsonl://<file>/<id>")
    p.add_argument("--title-field", default="title", help="title (default title)")
    p.add_argument(
        "--text-field", default="text", help="text: a string or a list of paragraphs (default text)"
    )
    p.add_argument("--published-field", default="published", help="publish date/time (default published)")
    p.add_argument(
        "--language-field", default="language", help="declared language, used when detection fails"
    )
    p.add_argument("--host", help="host of records whose URL names none (e.g. the publisher's domain)")
    p.add_argument("--min-chars", type=int, default=200, help="minimum text length (default 200)")
    return Config(**vars(p.parse_args(argv)))


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    summary = run(parse_args(argv))
    print(summary.table())


if __name__ == "__main__":
    main()
