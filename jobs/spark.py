"""Spark plumbing shared by the corpus jobs: the session and the partitioned Parquet writer."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from jobs import task_parquet
from udfs import storage
from udfs.schemas import TableSpec

SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
}
ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
INPUT_BATCH_ROWS = 1000  # rows per Arrow batch handed to a Python parser (corpus_session default)


def console_progress(stream: TextIO) -> str:
    """``spark.ui.showConsoleProgress`` for a driver whose console is ``stream``: the progress
    bar redraws itself with carriage returns, which a terminal overwrites but a log file or a CI
    log keeps, line after line; so it is shown on a terminal only."""
    try:
        return "true" if stream.isatty() else "false"
    except (AttributeError, ValueError):  # a closed or unusual stream
        return "false"


def spark_session(app_name: str, conf: dict[str, str] | None = None) -> SparkSession:
    """The active session, or a new one. Under spark-submit the master comes from the command
    line; run as ``python -m jobs.<job>`` it is ``local[*]`` (override with SPARK_MASTER). The
    console progress bar is on only when stderr is a terminal (``console_progress``)."""
    builder = SparkSession.builder.appName(app_name)
    builder = builder.config("spark.ui.showConsoleProgress", console_progress(sys.stderr))
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        builder = builder.master(os.environ.get("SPARK_MASTER", "local[*]"))
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    for key, value in {**SESSION_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    return spark


@contextmanager
def corpus_session(spark: SparkSession, batch_rows: int = INPUT_BATCH_ROWS) -> Iterator[SparkSession]:
    """Apply the corpus session settings (UTC, micros timestamps, dynamic partition overwrite) to
    a session the caller may have built differently, and hand Python parsers Arrow batches of
    ``batch_rows`` rows (whole pages are large) for as long as the job runs."""
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    previous = spark.conf.get(ARROW_BATCH, None)
    spark.conf.set(ARROW_BATCH, str(batch_rows))
    try:
        yield spark
    finally:
        if previous is None:
            spark.conf.unset(ARROW_BATCH)
        else:
            spark.conf.set(ARROW_BATCH, previous)


def spark_schema(spec: TableSpec, include_partitions: bool = True) -> StructType:
    """The Spark StructType of a table, derived from its Arrow schema (the single source of truth)."""
    schema = spec.schema if include_partitions else spec.file_schema
    return from_arrow_schema(schema)


def has_s3a(spark: SparkSession) -> bool:
    """True when the hadoop-aws S3A filesystem is on the classpath (cluster conf adds it)."""
    try:
        spark.sparkContext._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
    except Exception:  # py4j wraps ClassNotFoundException in its own error type
        return False
    return True


def write_partitioned(df: DataFrame, spec: TableSpec, root: str, append: bool = False) -> int:
    """Write ``df`` to ``spec``'s place under ``root``, replacing exactly the partitions it holds,
    or (``append``) adding its files to them, whose names are unique to this write; returns the
    rows written.

    Local roots and S3 roots on a cluster with s3a are written by Spark's own writer; an S3 root
    without s3a is written by the executors through pyarrow + s3fs (``jobs.task_parquet``), never
    through the driver's disk. Either way the rows in the files the write added are counted
    from their footers: fewer than went into the writer (a ``file://`` root whose files stayed on
    the executors' disks) is a ``WriteError``, not a success.
    """
    df = df.select(*[f.name for f in spec.schema])
    uri = spec.uri(root)
    if storage.is_s3(uri) and not has_s3a(df.sparkSession):
        return task_parquet.write(df, spec, uri, append)
    before = set(storage.table_files(uri))
    observation = Observation(f"write-{spec.name}")
    df = df.observe(observation, sf.count(sf.lit(1)).alias("rows"))
    # Per-write option: replace only the partitions present, whatever the session's setting.
    writer = df.write.mode("append" if append else "overwrite").option("partitionOverwriteMode", "dynamic")
    writer.partitionBy(*spec.partition_cols).parquet(spark_path(uri))
    counted = observation.get["rows"]
    landed = storage.footer_rows([f for f in storage.table_files(uri) if f not in before])
    if landed != counted:
        raise task_parquet.WriteError(
            f"{uri}: {counted} rows went into the write, the files it added hold {landed} "
            "(is the root on storage every node shares?)"
        )
    return landed


def spark_path(uri: str) -> str:
    """The path Spark's own readers and writers take for a URI: a local path, or s3a://."""
    return "s3a://" + uri[len("s3://") :] if storage.is_s3(uri) else storage.local_path(uri)
