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
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.articles_table import ingest_staged, record_run, stage_files
from jobs.spark import corpus_session, spark_session
from udfs import storage
from udfs.jsonl_articles import FieldMap, article_row, scan_lines
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


def staged_records(
    spark: SparkSession, files: list[str], config: Config, now: dt.datetime, n_parts: int
) -> DataFrame:
    """scan → spread → map, as one lazy DataFrame of STAGED rows (one per line or bad file)."""
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
    )


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
        ingest_staged(spark, staged, files, config.root, n_parts, summary)
    summary.metrics["JSON Lines files"] = len(files)
    summary.notes.append(
        "rows read = non-blank lines + files that could not be read + streams broken mid-file"
    )
    return record_run(summary, config.root, config, files)


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
