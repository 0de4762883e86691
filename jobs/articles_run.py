"""One article importer run: scan → parse as one lazy DataFrame of ``STAGED`` rows, run it once,
merge it into the tables (``jobs.articles_table.merge_and_write``) and record the run. Shared by
``jobs.ingest_news`` and ``jobs.ingest_articles_jsonl``."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.articles_table import STAGED, merge_and_write
from udfs import storage
from udfs.report import RunSummary
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.articles")

SCAN_BATCH_BYTES = 32 << 20  # a scan task flushes its rows at this many bytes of raw input
PART_BYTES = 16 << 20  # a small run gets a partition per this many bytes of input (as stored)


def row_partitions(files: list[str], cores: int) -> int:
    """Partitions of a run's rows (the spread parse, the dedup, the rejected rows): four per
    core, or one per file when there are more files. A run smaller than that many ``PART_BYTES``
    gets one per ``PART_BYTES`` of input, but at least one per core: a daily increment of one
    small file is not cut into tasks of a few records each, whose start-up costs more than
    their work. Only a run with fewer files than that looks at file sizes."""
    wide = max(4 * cores, len(files))
    if len(files) >= wide:
        return wide
    total = sum(storage.size(f) for f in files)
    return max(cores, min(wide, math.ceil(total / PART_BYTES)))


def stage_files(
    spark: SparkSession,
    files: list[str],
    scan: Callable[[str], Iterable[dict[str, Any]]],
    scan_schema: pa.Schema,
    size_column: str,
    scan_batch_rows: int,
    to_staged: Callable[[dict[str, Any]], dict[str, Any]],
    n_parts: int,
    spread: bool,
) -> DataFrame:
    """scan → parse, as one lazy DataFrame of ``STAGED`` rows: one task per file streams
    ``scan(path)`` rows and ``to_staged`` maps every row the scan did not already reject.

    With ``spread`` (fewer files than cores), the scanned rows, raw payloads included, are first
    hash-repartitioned on (file, offset) over ``n_parts`` tasks, so one large file is parsed on
    every core; otherwise each file is parsed inside the task that reads it, and no raw payload is
    ever shuffled. Scan batches flush at ``SCAN_BATCH_BYTES`` of ``size_column`` or
    ``scan_batch_rows`` rows."""
    names = STAGED.names

    def staged_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for row in rows:
            staged = row if row["reason"] else to_staged(row)
            out.append({k: staged.get(k) for k in names})
        return out

    def scanned(batches: Iterator[pa.RecordBatch]) -> Iterator[list[dict[str, Any]]]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                rows, size = [], 0
                for row in scan(files[index]):
                    rows.append(row)
                    size += len(row[size_column] or b"")
                    if size >= SCAN_BATCH_BYTES or len(rows) >= scan_batch_rows:
                        yield rows
                        rows, size = [], 0
                if rows:
                    yield rows

    def scan_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rows in scanned(batches):
            yield pa.RecordBatch.from_pylist(rows, schema=scan_schema)

    def scan_and_parse_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rows in scanned(batches):
            yield pa.RecordBatch.from_pylist(staged_rows(rows), schema=STAGED)

    def parse_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_pylist(staged_rows(batch.to_pylist()), schema=STAGED)

    tasks = spark.range(len(files), numPartitions=max(1, len(files)))
    if not spread:
        return tasks.mapInArrow(scan_and_parse_task, from_arrow_schema(STAGED))
    scanned_rows = tasks.mapInArrow(scan_task, from_arrow_schema(scan_schema))
    return scanned_rows.repartition(n_parts, "warc_file", "record_offset").mapInArrow(
        parse_task, from_arrow_schema(STAGED)
    )


def ingest_staged(
    spark: SparkSession,
    staged: DataFrame,
    files: list[str],
    root: str,
    n_parts: int,
    summary: RunSummary,
    near_duplicate_similarity: float | None = None,
    check: Callable[[DataFrame], None] | None = None,
) -> None:
    """Run the staged plan once (persisted: counting it and merging it must not scan and parse
    twice), let ``check`` refuse it before anything is written, then merge it into the tables;
    times both halves in ``summary``."""
    staged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        started = time.time()
        summary.rows_read = staged.count()
        summary.metrics["seconds scan + parse"] = round(time.time() - started, 1)
        if check is not None:
            check(staged)
        started = time.time()
        merge_and_write(spark, staged, files, root, n_parts, summary, near_duplicate_similarity)
        summary.metrics["seconds dedup + write"] = round(time.time() - started, 1)
    finally:
        staged.unpersist()


def record_run(summary: RunSummary, root: str, config: Any, files: list[str]) -> RunSummary:
    """Close the summary and store it, with the run's config and input files, as the articles
    table's ``_SUCCESS.json``."""
    summary.finish()
    storage.mark_done(
        ARTICLES.uri(root), {**summary.to_dict(), "config": asdict(config), "input_files": files}
    )
    log.info("stage=done %s", summary.to_dict())
    return summary
