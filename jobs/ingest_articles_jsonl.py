"""News articles as JSON Lines → the ``articles`` table (and ``articles_rejected``), with Spark.

    spark-submit jobs/ingest_articles_jsonl.py --root s3://bucket/augury 's3://bucket/news/*.jsonl.gz'
    python -m jobs.ingest_articles_jsonl --root ./out ../shared/data/wcep/reportedly_articles_2015-09.json

Stages (``stage=…`` in the logs):

1. **scan**: one task per file streams its lines (local or S3, plain or gzip; ``udfs.jsonl_articles``).
   Reading in Python rather than with Spark's JSON source gives every record its line number and
   byte offset (record ids, stable tie-breaks) and keeps one damaged file from failing the job.
2. **spread**: with fewer files than cores, the lines are hash-repartitioned on (file, offset)
   over all cores; otherwise each file's lines are mapped inside the task that reads it.
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

import datetime as dt
import logging
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.articles_run import ingest_staged, record_run, row_partitions, stage_files
from jobs.spark import corpus_session, spark_session
from udfs import storage
from udfs.cli import InputError, option, parse, run_cli
from udfs.jsonl_articles import FieldMap, article_row, scan_lines
from udfs.layout import Layout
from udfs.report import RunSummary

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
SCAN_BATCH_ROWS = 1000  # a scan batch flushes at this many lines (or SCAN_BATCH_BYTES of lines)


@dataclass(frozen=True)
class Config:
    """Everything one run needs; every field is also a command-line option."""

    root: str = option(help="output root URI (a path, file:// or s3://); must not be a file")
    inputs: list[str] = option(
        default_factory=list,
        positional=True,
        help="JSON Lines files or globs (local, s3://, s3a://; .gz too)",
    )
    id_field: str = option("id", help="record id; else the line number")
    url_field: str = option("url", help="article URL; else jsonl://<file>/<id>")
    title_field: str = option("title", help="title")
    text_field: str = option("text", help="text: a string or a list of paragraphs")
    published_field: str = option("published", help="publish date/time")
    language_field: str = option("language", help="declared language, used when detection fails")
    host: str | None = option(None, help="host of records whose URL names none (e.g. the publisher's domain)")
    min_chars: int = option(200, min=0, help="minimum text length")

    def __post_init__(self) -> None:
        if not self.inputs:
            raise ValueError("give JSON Lines paths or globs")
        names = (self.id_field, self.url_field, self.title_field, self.text_field)
        if not all(names) or not self.published_field or not self.language_field:
            raise ValueError("field names must not be empty")
        if self.min_chars < 0:
            raise ValueError("argument --min-chars: must not be negative")

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


def staged_records(
    spark: SparkSession, files: list[str], config: Config, now: dt.datetime, n_parts: int, spread: bool
) -> DataFrame:
    """scan → map, as one lazy DataFrame of STAGED rows (one per line or bad file)."""
    fields = config.fields()
    return stage_files(
        spark,
        files,
        scan=scan_lines,
        scan_schema=LINES,
        size_column="line",
        scan_batch_rows=SCAN_BATCH_ROWS,
        to_staged=lambda row: article_row(row, fields, now),
        n_parts=n_parts,
        spread=spread,
    )


def input_files(config: Config) -> list[str]:
    """The input files, checked before any work (a root that is a file, a pattern that matches
    nothing: ``InputError``)."""
    Layout(config.root).check_root(must_exist=False)
    try:
        return storage.expand_inputs(config.inputs)
    except (FileNotFoundError, ValueError) as exc:
        raise InputError(str(exc)) from None


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Import the JSON Lines files of ``config`` into ``articles`` / ``articles_rejected``."""
    files = input_files(config)
    summary = RunSummary(name="ingest_articles_jsonl")
    log.info("stage=plan %d JSON Lines files, root=%s", len(files), config.root)
    spark = spark or spark_session("augury-ingest-articles-jsonl")
    with corpus_session(spark):
        cores = spark.sparkContext.defaultParallelism
        n_parts = row_partitions(files, cores)
        staged = staged_records(spark, files, config, dt.datetime.now(dt.UTC), n_parts, len(files) < cores)
        ingest_staged(spark, staged, files, config.root, n_parts, summary)
    summary.metrics["JSON Lines files"] = len(files)
    summary.notes.append(
        "rows read = non-blank lines + files that could not be read + streams broken mid-file"
    )
    return record_run(summary, config.root, config, files)


def parse_args(argv: list[str] | None = None) -> Config:
    return parse(Config, argv, "ingest_articles_jsonl", __doc__.split("\n\n")[0])


def main(argv: list[str] | None = None) -> None:
    summary = run_cli(Config, run, "ingest_articles_jsonl", __doc__.split("\n\n")[0], argv)
    print(summary.table())


if __name__ == "__main__":
    main()
