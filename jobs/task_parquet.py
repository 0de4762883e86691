"""Parquet that the executors write and read themselves, through pyarrow + s3fs: how the corpus
jobs use an S3 root on a cluster whose Spark has no s3a (hadoop-aws).

Writing: every task writes the rows of its partition (sorted by the table's partition columns,
so one file is open at a time) into ``<table>/_staging-<write id>/<k=v>/``, under names unique to
the task attempt (``part-<write id>-<partition>-<attempt>-<n>.parquet``), and returns one report
row per file. Spark hands the driver the results of exactly one successful attempt per
partition, so the reports name the committed files: the driver replaces the partitions they
fill (or adds to them), moves those files into place and deletes the staging folder with
whatever failed, retried or speculative attempts left there. A file never goes through the
driver's disk. Partition folders are named as Spark names them (same escaping, the same null
partition), so a table written here and one written by Spark mix.

Reading: the driver lists the files (names only); tasks read them, projected, and hand Arrow
batches to Spark.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from udfs import storage
from udfs.schemas import TableSpec

log = logging.getLogger("augury.spark")

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# Characters Spark escapes in partition folder names (ExternalCatalogUtils.escapePathName).
_ESCAPED = {
    *map(chr, range(1, 32)),
    '"',
    "#",
    "%",
    "'",
    "*",
    "/",
    ":",
    "=",
    "?",
    "\\",
    "\x7f",
    "{",
    "[",
    "]",
    "^",
}
ROW_GROUP_ROWS = 64 * 1024  # rows buffered before a row group is written
ROW_GROUP_BYTES = 64 << 20  # or this many bytes of Arrow data
REPORT = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("attempt", pa.int64()),
        pa.field("folder", pa.string()),  # the partition folder (k=v[/k2=v2]), "" when unpartitioned
        pa.field("name", pa.string()),
        pa.field("rows", pa.int64()),
    ]
)
THREADS = 16  # concurrent S3 requests of the commit
STAGING = "_staging-{}"  # the folder of a write's files until the commit (hidden from readers)


class WriteError(RuntimeError):
    """What the tasks wrote did not reach the table whole."""


def escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def partition_folder(columns: Sequence[str], values: Sequence[Any]) -> str:
    """``k=v[/k2=v2]`` for the partition values of a row, as Spark names the folder."""
    parts = []
    for column, value in zip(columns, values, strict=True):
        text = (
            NULL_PARTITION
            if value is None
            else escape(value.isoformat() if hasattr(value, "isoformat") else str(value))
        )
        parts.append(f"{column}={text}")
    return "/".join(parts)


class _FileWriter:
    """The task's open file: row groups of at least ``ROW_GROUP_ROWS`` rows (Spark hands batches
    of as few as 32 rows)."""

    def __init__(self, fs: pafs.FileSystem, path: str, schema: pa.Schema):
        self.stream = fs.open_output_stream(path, compression=None)
        self.writer = pq.ParquetWriter(self.stream, schema)
        self.schema = schema
        self.pending: list[pa.Table] = []
        self.rows = self.pending_rows = self.pending_bytes = 0

    def add(self, table: pa.Table) -> None:
        self.pending.append(table.select(self.schema.names).cast(self.schema))
        self.pending_rows += table.num_rows
        self.pending_bytes += table.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS or self.pending_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.concat_tables(self.pending), row_group_size=max(self.pending_rows, 1))
            self.rows += self.pending_rows
            self.pending, self.pending_rows, self.pending_bytes = [], 0, 0

    def close(self) -> int:
        self.flush()
        self.writer.close()
        self.stream.close()
        return self.rows


def _runs(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[tuple, pa.Table]]:
    """(partition values, rows) for each run of consecutive rows with the same values."""
    keys = list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
    start = 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end] != keys[start]:
            yield keys[start], table.slice(start, end - start)
            start = end


def write_task(
    spec: TableSpec, staging: str, write_id: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` body that writes one task's rows (sorted by partition values) under
    ``staging``, one file per partition folder, and reports its files."""
    columns, file_schema = list(spec.partition_cols), spec.file_schema

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.taskAttemptId()
        fs, base = storage.filesystem(staging)
        reports: list[dict[str, Any]] = []
        current: tuple | None = None
        writer: _FileWriter | None = None
        for batch in batches:
            for key, rows in _runs(pa.Table.from_batches([batch]), columns):
                if key != current:
                    if writer is not None:
                        reports[-1]["rows"] = writer.close()
                    folder = partition_folder(columns, key)
                    name = f"part-{write_id}-{partition:05d}-{attempt}-{len(reports)}.parquet"
                    fs.create_dir(posixpath.join(base, folder), recursive=True)
                    writer, current = _FileWriter(fs, posixpath.join(base, folder, name), file_schema), key
                    reports.append(
                        {"partition": partition, "attempt": attempt, "folder": folder, "name": name}
                    )
                writer.add(rows)
        if writer is not None:
            reports[-1]["rows"] = writer.close()
            yield pa.RecordBatch.from_pylist(reports, schema=REPORT)

    return task


def write(df: DataFrame, spec: TableSpec, uri: str, append: bool) -> int:
    """Write ``df`` (the columns of a partitioned table) under ``uri`` from the executors and
    commit it on the driver: replace the partitions it fills, or add its files to them with
    ``append``. Returns the rows written; a commit that lands other than the rows the tasks
    wrote is a ``WriteError``."""
    if not spec.partition_cols:
        raise ValueError(f"{spec.name}: the executors write partitioned tables only")
    write_id = uuid.uuid4().hex[:12]
    staging = storage.join(uri, STAGING.format(write_id))
    df = df.sortWithinPartitions(*spec.partition_cols)
    try:
        reports = df.mapInArrow(write_task(spec, staging, write_id), from_arrow_schema(REPORT)).collect()
        return commit(uri, write_id, [r.asDict() for r in reports], append)
    finally:
        storage.delete(staging)


def commit(uri: str, write_id: str, reports: list[dict[str, Any]], append: bool) -> int:
    """Move the reported files from the write's staging folder into the table at ``uri`` (after
    deleting the partition folders they replace, unless ``append``), then count their rows again
    from the files in place. Files in staging that no report names are left there."""
    fs, base = storage.filesystem(uri)
    staged = posixpath.join(base, STAGING.format(write_id))
    folders = sorted({r["folder"] for r in reports})
    with ThreadPoolExecutor(THREADS) as pool:
        if not append:
            list(pool.map(lambda folder: _delete_dir(fs, posixpath.join(base, folder)), folders))
        list(pool.map(lambda folder: fs.create_dir(posixpath.join(base, folder), recursive=True), folders))
        moves = [
            (posixpath.join(staged, r["folder"], r["name"]), posixpath.join(base, r["folder"], r["name"]))
            for r in reports
        ]
        list(pool.map(lambda move: fs.move(*move), moves))
    landed = storage.footer_rows([storage.join(uri, r["folder"], r["name"]) for r in reports])
    expected = sum(r["rows"] for r in reports)
    if landed != expected:
        raise WriteError(f"{uri}: the tasks wrote {expected} rows, the committed files hold {landed}")
    log.info("committed %d files (%d rows) to %s from the executors", len(moves), landed, uri)
    return landed


def _delete_dir(fs: pafs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


# ---------------------------------------------------------------- reading


def read(
    spark: SparkSession,
    table: str,
    schema: pa.Schema,
    columns: Sequence[str],
    partition_cols: Sequence[str] = (),
    files: Sequence[str] | None = None,
    file_column: str | None = None,
) -> DataFrame:
    """``columns`` of the table at ``table`` (a URI), or of some of its ``files``, read by the
    executors: partition columns come from the folder names (``schema`` types them) and
    ``file_column`` names each row's file."""
    files = storage.table_files(table) if files is None else [storage.normalize_uri(f) for f in files]
    table = storage.normalize_uri(table)
    fields = [schema.field(c) for c in columns]
    out = pa.schema(fields + ([pa.field(file_column, pa.string())] if file_column else []))
    stored = [c for c in columns if c not in partition_cols]
    partitioning = ds.partitioning(pa.schema([schema.field(c) for c in partition_cols]), flavor="hive")

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri in batch.column(0).to_pylist():
                folder = posixpath.dirname(uri[len(table) + 1 :])
                keys = ds.get_partition_keys(partitioning.parse(folder + "/")) if folder else {}
                fs, path = storage.filesystem(uri)
                with fs.open_input_file(path) as f:
                    for part in pq.ParquetFile(f).iter_batches(columns=stored):
                        n = part.num_rows
                        arrays = [
                            part.column(fld.name).cast(fld.type)
                            if fld.name in stored
                            else pa.array([keys.get(fld.name)] * n, fld.type)
                            for fld in fields
                        ]
                        if file_column:
                            arrays.append(pa.array([uri] * n, pa.string()))
                        yield pa.RecordBatch.from_arrays(arrays, schema=out)

    listing = spark.createDataFrame([(f,) for f in files], "uri string")
    tasks = max(1, min(len(files), spark.sparkContext.defaultParallelism * 4))
    return listing.repartition(tasks).mapInArrow(task, from_arrow_schema(out))
