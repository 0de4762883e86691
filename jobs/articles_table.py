"""The ``articles`` / ``articles_rejected`` tables: how one run's rows join what is already there.

Every article importer (``jobs.ingest_news`` for WARC files, ``jobs.ingest_articles_jsonl`` for
JSON Lines) turns its input into ``STAGED`` rows, one per input record: an article candidate
(``reason`` null) or a rejected record. ``jobs.articles_run`` holds the shared scan → parse plan
and runs it once; ``merge_and_write`` here is the one place where those
rows are deduplicated (``jobs.articles_dedup``) and written, so that news arriving day after day
can be ingested batch by batch:

* **A run is authoritative for its own input files.** Rows that earlier runs took from the same
  files (same ``udfs.storage.normalize_uri``) are replaced: a rerun of the same inputs is
  idempotent and picks up extractor fixes. Rows from other files are kept.
* **Deduplication spans runs.** A candidate whose canonical URL, then text hash, matches an
  article already in the table from another file is rejected (``duplicate_url`` /
  ``duplicate_text``, ``duplicate_of`` = that article): the first ingested copy wins.
* **A run rewrites only the rows it must.** It adds its articles as new Parquet files inside the
  date partitions (Spark's append, one write job, file names unique to it), then deletes the
  files that held the earlier rows of its input files. Rows of other files are rewritten only
  when they share such a file (a file written by an earlier run over a different set of inputs);
  a date partition left without files is removed. Within a date, the rows are spread over
  ``ceil(rows / ROWS_PER_FILE)`` writer tasks (a salt on the article id), so a big date, and the
  undated partition, are not written by one task.
* ``articles_rejected`` is partitioned by ``shard``, a stable hash of the input file's URI, so a
  run replaces exactly the rejects of its own files.

What exists is read by Spark (local roots, and S3 through s3a) or, without s3a, by the executors
through pyarrow (``jobs.task_parquet``): the dedup columns of the whole table with the file each
row is in, and full rows only of the files being rewritten. Both are materialised (local
checkpoint) before the first write. One run at a time per root: concurrent runs are not
coordinated. If the job dies between its write and its deletes, the table holds both copies of
the run's rows until the same inputs are run again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from jobs import task_parquet
from jobs.articles_dedup import (
    KEY_COLUMNS,
    REJECT_COLUMNS,
    ROW_KEY,
    against_table,
    deduplicate,
    near_duplicates,
)
from jobs.articles_summary import count_run, report_orphans
from jobs.spark import has_s3a, spark_path, spark_schema, write_partitioned
from udfs import storage
from udfs.cli import InputError
from udfs.ids import stable_id
from udfs.report import RunSummary
from udfs.schemas import ARTICLES, ARTICLES_REJECTED, TableSpec

log = logging.getLogger("augury.articles")

# The rows an importer hands over: every article column (nullable) plus the rejection columns.
STAGED = pa.schema(
    [f.with_nullable(True) for f in ARTICLES.schema]
    + [
        pa.field("record_offset", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
# What is read of the whole table to deduplicate against it and to find this run's old rows.
INDEX_COLUMNS = ("article_id", "canonical_url", "text_hash", "warc_file", "published_date")
FILE = "_file"  # the index column naming the Parquet file a row is in
ROWS_PER_FILE = 100_000  # articles per written file and writer task within one date (~300 MB of text)


def rejected_shard(file_uri: str) -> str:
    """The ``articles_rejected`` partition of an input file: 16 hex digits of its normalised URI
    (64 bits, so two files of one corpus practically never share a shard)."""
    return stable_id(storage.normalize_uri(file_uri), length=8)


# ---------------------------------------------------------------- reading what exists


def _spark_reads(spark: SparkSession, uri: str) -> bool:
    """Whether Spark's own reader takes ``uri`` (local, or S3 through s3a); else the executors
    read the files through pyarrow (``jobs.task_parquet``)."""
    return not storage.is_s3(uri) or has_s3a(spark)


def read_index(spark: SparkSession, root: str) -> DataFrame:
    """``INDEX_COLUMNS`` of every article in the table, with the URI of its Parquet file."""
    uri = ARTICLES.uri(root)
    if not _spark_reads(spark, uri):
        return task_parquet.read(
            spark, uri, ARTICLES.schema, INDEX_COLUMNS, ARTICLES.partition_cols, file_column=FILE
        )
    if not storage.exists(uri):
        return spark.createDataFrame([], spark_schema(ARTICLES)).select(
            *INDEX_COLUMNS, sf.lit("").alias(FILE)
        )
    df = spark.read.schema(spark_schema(ARTICLES)).parquet(spark_path(uri))
    # Spark names files by URI (percent-encoded); the deletes want plain paths.
    return df.select(*INDEX_COLUMNS, sf.url_decode(sf.input_file_name()).alias(FILE))


def read_columns(spark: SparkSession, spec: TableSpec, root: str, columns: Iterable[str]) -> DataFrame:
    """``columns`` of every row of a table under ``root`` (an absent table reads as empty)."""
    columns = list(columns)
    uri = spec.uri(root)
    if not _spark_reads(spark, uri):
        return task_parquet.read(spark, uri, spec.schema, columns, spec.partition_cols)
    if not storage.exists(uri):
        return spark.createDataFrame([], spark_schema(spec)).select(*columns)
    return spark.read.schema(spark_schema(spec)).parquet(spark_path(uri)).select(*columns)


def read_files(spark: SparkSession, root: str, files: list[str]) -> DataFrame:
    """Full rows of some Parquet files of the table (their ``published_date`` from their path)."""
    uri = ARTICLES.uri(root)
    if not _spark_reads(spark, uri):
        return task_parquet.read(
            spark, uri, ARTICLES.schema, ARTICLES.schema.names, ARTICLES.partition_cols, files=files
        )
    return spark.read.option("basePath", spark_path(uri)).schema(spark_schema(ARTICLES)).parquet(*files)


def _partition_dirs(spec: TableSpec, root: str) -> list[str]:
    """Names of the partition directories (``key=value``) directly under the table."""
    fs, path = storage.filesystem(spec.uri(root))
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and "=" in i.base_name)


def _remove_empty_partitions(spec: TableSpec, root: str) -> int:
    """Delete the partition directories that hold no Parquet file any more; returns how many."""
    removed = 0
    for name in _partition_dirs(spec, root):
        folder = storage.join(spec.uri(root), name)
        if not storage.list_files(folder, ".parquet"):
            storage.delete(folder)
            removed += 1
    return removed


def check_layout(root: str) -> None:
    """Refuse a root whose ``articles_rejected`` still uses the old ``reason=`` partitioning: a
    run would mix layouts (delete that directory and rerun the inputs to rebuild it)."""
    old = [d for d in _partition_dirs(ARTICLES_REJECTED, root) if not d.startswith("shard=")]
    if old:
        raise InputError(
            f"{ARTICLES_REJECTED.uri(root)} holds partitions of an older layout ({', '.join(old[:3])}, …); "
            "delete it, then rerun the ingest over all inputs to rebuild it"
        )


def conform(df: DataFrame, spec: TableSpec) -> DataFrame:
    """``df`` with exactly the table's Spark schema, non-null columns included (Spark cannot
    narrow nullability itself; an Arrow pass-through with the declared schema does)."""
    return df.select(*spec.schema.names).mapInArrow(lambda batches: batches, spark_schema(spec))


def salted(articles: DataFrame, rows_by_date: dict) -> DataFrame:
    """``articles`` partitioned for the write: a date's rows go to ``ceil(rows / ROWS_PER_FILE)``
    writer tasks of their own (a salt from the article id picks one), each writing one file of
    that date; so neither a big date nor the undated partition is written by a single task."""
    spark = articles.sparkSession
    plan, first = [], 0
    for date in sorted(rows_by_date, key=lambda d: (d is not None, d)):
        buckets = max(1, math.ceil(rows_by_date[date] / ROWS_PER_FILE))
        plan.append((date, buckets, first))
        first += buckets
    table = spark.createDataFrame(plan, "_date date, _buckets long, _first long")
    joined = articles.join(sf.broadcast(table), articles["published_date"].eqNullSafe(table["_date"]), "left")
    task = sf.col("_first") + sf.pmod(sf.xxhash64("article_id"), sf.col("_buckets"))
    # Range partitioning on the task number gives each task number a partition of its own.
    return (
        joined.withColumn("_task", task)
        .repartitionByRange(max(1, first), "_task")
        .drop("_date", "_buckets", "_first", "_task")
    )


# ---------------------------------------------------------------- the merge


def merge_and_write(
    spark: SparkSession,
    staged: DataFrame,
    files: list[str],
    root: str,
    n_parts: int,
    summary: RunSummary,
    near_duplicate_similarity: float | None = None,
) -> None:
    """Deduplicate the ``STAGED`` rows of a run over ``files`` against each other and against the
    table, write both tables under ``root`` by the rules in the module docstring, and fill
    ``summary`` (rows written and rejected are this run's; ``rows_read`` is the caller's)."""
    check_layout(root)
    own = {storage.normalize_uri(f) for f in files}
    # Checkpointed (as is ``carried`` below): the deletes remove files these rows come from, so
    # nothing downstream may re-read the table lazily.
    index = read_index(spark, root).localCheckpoint(eager=True)
    stored = index.groupBy("warc_file", FILE).count().collect()  # one small job: rows per (input, file)
    mine = {r["warc_file"] for r in stored if r["warc_file"] and storage.normalize_uri(r["warc_file"]) in own}
    own_stored = sorted(mine)
    is_own = sf.coalesce(sf.col("warc_file").isin(own_stored), sf.lit(False))
    stale = sorted({r[FILE] for r in stored if r["warc_file"] in mine})
    shared = sorted({r[FILE] for r in stored if r["warc_file"] not in mine and r[FILE] in set(stale)})
    replaced = sum(r["count"] for r in stored if r["warc_file"] in mine)

    persisted: list[DataFrame] = []
    try:
        candidates = staged.where(sf.col("reason").isNull())
        fresh, table_dups = against_table(candidates.select(*KEY_COLUMNS), index.where(~is_own))
        kept_keys, run_dups = deduplicate(fresh, n_parts)
        kept = candidates.join(kept_keys.select(*ROW_KEY), list(ROW_KEY), "left_semi")
        if near_duplicate_similarity is not None:
            persisted.append(kept.persist(StorageLevel.MEMORY_AND_DISK))  # sketched, then joined
            marks = near_duplicates(kept, near_duplicate_similarity)
            kept = kept.drop("near_duplicate_of").join(marks, "article_id", "left")
        kept = kept.select(*ARTICLES.schema.names).persist(StorageLevel.MEMORY_AND_DISK)
        shards = spark.createDataFrame(
            [(f, rejected_shard(f)) for f in files], "warc_file string, shard string"
        )
        rejected = (
            staged.where(sf.col("reason").isNotNull())
            .select(*REJECT_COLUMNS, sf.lit(None).cast("string").alias("duplicate_of"), "detail", "reason")
            .unionByName(table_dups)
            .unionByName(run_dups)
            .join(sf.broadcast(shards), "warc_file", "left")
        )
        rejected = conform(rejected.repartition(n_parts, "shard"), ARTICLES_REJECTED)
        persisted += [kept, rejected.persist(StorageLevel.MEMORY_AND_DISK)]
        new_dates, new_shards = count_run(summary, kept, rejected, near_duplicate_similarity is not None)
        carried = kept.limit(0)
        if shared:
            carried = read_files(spark, root, shared).where(~is_own)
            carried = carried.select(*ARTICLES.schema.names).localCheckpoint(eager=True)
        carried_dates = _count_by_date(carried) if shared else {}
        if own_stored:
            dups = read_columns(spark, ARTICLES_REJECTED, root, ("warc_file", "duplicate_of", "reason"))
            report_orphans(dups, index.where(is_own), kept, own, summary)

        rows_by_date = {
            d: new_dates.get(d, 0) + carried_dates.get(d, 0) for d in {*new_dates, *carried_dates}
        }
        articles = conform(salted(kept.unionByName(carried), rows_by_date), ARTICLES)
        write_partitioned(articles, ARTICLES, root, append=True)
        for file in stale:
            storage.delete(file)
        emptied = _remove_empty_partitions(ARTICLES, root)
        write_partitioned(rejected, ARTICLES_REJECTED, root)
        stale_shards = {f"shard={rejected_shard(f)}" for f in files} - {f"shard={s}" for s in new_shards}
        for name in stale_shards & set(_partition_dirs(ARTICLES_REJECTED, root)):
            storage.delete(storage.join(ARTICLES_REJECTED.uri(root), name))
    finally:
        for df in persisted:
            df.unpersist()
    summary.metrics["articles replaced (earlier runs of these files)"] = replaced
    summary.metrics["articles of other files rewritten (they shared a file with replaced rows)"] = sum(
        carried_dates.values()
    )
    summary.metrics["Parquet files replaced"] = len(stale)
    summary.metrics["date partitions written"] = len(rows_by_date)
    summary.metrics["date partitions emptied and removed"] = emptied


def _count_by_date(df: DataFrame) -> dict:
    """``published_date → rows`` of ``df``."""
    return {r["published_date"]: r["count"] for r in df.groupBy("published_date").count().collect()}
