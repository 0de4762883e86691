"""The ``articles`` / ``articles_rejected`` tables: how one run's rows join what is already there.

Every article importer (``jobs.ingest_news`` for WARC files, ``jobs.ingest_articles_jsonl`` for
JSON Lines) turns its input into ``STAGED`` rows, one per input record: an article candidate
(``reason`` null) or a rejected record. ``stage_files`` is the shared scan → spread → parse plan,
``ingest_staged`` runs it once and merges, and ``merge_and_write`` is the one place where those
rows are deduplicated and written, so that news arriving day after day can be ingested batch by
batch:

* **A run is authoritative for its own input files.** Rows that earlier runs took from the same
  files (same ``udfs.storage.normalize_uri``) are replaced: a rerun of the same inputs is
  idempotent and picks up extractor fixes. Rows from other files are kept.
* **Deduplication spans runs.** A candidate whose canonical URL, then text hash, matches an
  article already in the table from another file is rejected (``duplicate_url`` /
  ``duplicate_text``, ``duplicate_of`` = that article): the first ingested copy wins. The
  remaining candidates are deduplicated among themselves, earliest crawl first (ties: file,
  offset).
* **Exactly the affected date partitions are rewritten**: the dates the run produces plus the
  dates that held rows of its files before. Each is rewritten with the new rows and the rows of
  other files it already held; a date left with no row is deleted.
* ``articles_rejected`` is partitioned by ``shard``, a stable hash of the input file's URI, so a
  run replaces exactly the rejects of its own files.

What exists is read with Spark (local roots, and S3 through s3a on a cluster) or, on a laptop
without s3a, through pyarrow into the session: the dedup columns of the whole table, and full rows
only for the partitions being rewritten. Everything read from the table is materialised (local
checkpoint) before the first write, so no write overwrites files a lazy plan still reads from.
One run at a time per root: concurrent runs are not coordinated.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.spark import has_s3a, spark_schema, write_partitioned
from udfs import near_dup, storage
from udfs.ids import stable_id
from udfs.report import RunSummary
from udfs.schemas import ARTICLE_REJECT_REASONS, ARTICLES, ARTICLES_REJECTED, TableSpec

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
DEDUP_KEYS = (("canonical_url", "duplicate_url"), ("text_hash", "duplicate_text"))
# The rejected columns a STAGED row carries (the rest are set by the dedup or the write).
_REJECT_COLUMNS = [
    c for c in ARTICLES_REJECTED.schema.names if c not in ("detail", "duplicate_of", "reason", "shard")
]


def rejected_shard(file_uri: str) -> str:
    """The ``articles_rejected`` partition of an input file: 16 hex digits of its normalised URI
    (64 bits, so two files of one corpus practically never share a shard)."""
    return stable_id(storage.normalize_uri(file_uri), length=8)


# ---------------------------------------------------------------- reading what exists


def _partition_filter(column: str, values: Iterable) -> tuple[Column, ds.Expression]:
    """The same partition predicate for Spark and for pyarrow (null = the default partition)."""
    values = list(values)
    present = [v for v in values if v is not None]
    spark_pred = sf.col(column).isin(present) if present else sf.lit(False)
    arrow_pred = ds.field(column).isin(present) if present else ds.scalar(False)
    if None in values:
        spark_pred = spark_pred | sf.col(column).isNull()
        arrow_pred = arrow_pred | ds.field(column).is_null()
    return spark_pred, arrow_pred


def read_existing(
    spark: SparkSession,
    spec: TableSpec,
    root: str,
    columns: Iterable[str],
    partitions: Iterable | None = None,
) -> DataFrame:
    """``columns`` of the rows ``spec`` holds under ``root`` (an absent table reads as empty),
    restricted to the given values of its partition column when ``partitions`` is given."""
    columns = list(columns)
    uri = spec.uri(root)
    predicate = _partition_filter(spec.partition_cols[0], partitions) if partitions is not None else None
    if storage.is_s3(uri) and not has_s3a(spark):
        table = storage.read_table(
            uri,
            spec.schema,
            spec.partition_cols,
            columns=columns,
            filter=predicate[1] if predicate else None,
        )
        return spark.createDataFrame(table, from_arrow_schema(table.schema))
    schema = spark_schema(spec)
    if not storage.exists(uri):
        return spark.createDataFrame([], schema).select(*columns)
    path = storage.local_path(uri) if not storage.is_s3(uri) else "s3a://" + uri[len("s3://") :]
    df = spark.read.schema(schema).parquet(path)
    return (df.where(predicate[0]) if predicate else df).select(*columns)


def _partition_dirs(spec: TableSpec, root: str) -> list[str]:
    """Names of the partition directories (``key=value``) directly under the table."""
    fs, path = storage.filesystem(spec.uri(root))
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path))
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory and "=" in i.base_name)


def _partition_dir(column: str, value: object) -> str:
    return f"{column}={'__HIVE_DEFAULT_PARTITION__' if value is None else value}"


def _delete_partitions(spec: TableSpec, root: str, names: Iterable[str]) -> None:
    for name in names:
        storage.delete(storage.join(spec.uri(root), name))


def check_layout(root: str) -> None:
    """Refuse a root whose ``articles_rejected`` still uses the old ``reason=`` partitioning: a
    run would mix layouts (delete that directory and rerun the inputs to rebuild it)."""
    old = [d for d in _partition_dirs(ARTICLES_REJECTED, root) if not d.startswith("shard=")]
    if old:
        raise ValueError(
            f"{ARTICLES_REJECTED.uri(root)} holds partitions of an older layout ({', '.join(old[:3])}, …); "
            "delete it, then rerun the ingest over all inputs to rebuild it"
        )


# ---------------------------------------------------------------- deduplication


def _order() -> list[Column]:
    """Earliest crawl first; file and offset break ties, so the choice is the same on every run."""
    return [
        sf.col("crawled_at").asc_nulls_last(),
        sf.col("warc_file").asc(),
        sf.col("record_offset").asc(),
    ]


def _duplicates(df: DataFrame, kept_id: Column, detail: Column, reason: str) -> DataFrame:
    """Rejected rows (without shard) for the duplicate candidates in ``df``."""
    return df.select(
        *_REJECT_COLUMNS,
        kept_id.alias("duplicate_of"),
        detail.alias("detail"),
        sf.lit(reason).alias("reason"),
    )


def against_table(candidates: DataFrame, others: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(fresh, duplicates)``: candidates whose canonical URL, then text hash, is already in the
    table (``others``: the index rows of other files) are duplicates of that article."""
    dups = []
    for key, reason in DEDUP_KEYS:
        first = (
            others.where(sf.col(key).isNotNull())
            .groupBy(key)
            .agg(sf.min(sf.struct("article_id", "warc_file")).alias("_kept"))
        )
        joined = candidates.join(first, key, "left")
        dups.append(
            _duplicates(
                joined.where(sf.col("_kept").isNotNull()),
                sf.col("_kept.article_id"),
                sf.concat(
                    sf.lit(f"{key} already in the table from "), sf.coalesce("_kept.warc_file", sf.lit("?"))
                ),
                reason,
            )
        )
        candidates = joined.where(sf.col("_kept").isNull()).drop("_kept")
    return candidates, dups[0].unionByName(dups[1])


def deduplicate(articles: DataFrame, n_parts: int) -> tuple[DataFrame, DataFrame]:
    """``(kept, duplicates)`` within one run: exact duplicates by canonical URL, then by text
    hash; the earliest crawl of each is kept."""
    dups = []
    kept = articles
    for key, reason in DEDUP_KEYS:
        window = Window.partitionBy(key).orderBy(*_order())
        first_at = sf.concat_ws(
            "@", sf.first("warc_file").over(window), sf.first("record_offset").over(window)
        )
        ranked = (
            kept.repartition(n_parts, key)
            .withColumn("_rank", sf.row_number().over(window))
            .withColumn("_keep_id", sf.first("article_id").over(window))
            .withColumn("_keep_at", first_at)
        )
        dups.append(
            _duplicates(
                ranked.filter(sf.col("_rank") > 1),
                sf.col("_keep_id"),
                sf.concat(sf.lit(f"{key} also at "), sf.col("_keep_at")),
                reason,
            )
        )
        kept = ranked.filter(sf.col("_rank") == 1).drop("_rank", "_keep_id", "_keep_at")
    return kept, dups[0].unionByName(dups[1])


SKETCHED = pa.schema(
    [
        pa.field("article_id", pa.string()),
        pa.field("shingles", pa.list_(pa.int64())),
        pa.field("bands", pa.list_(pa.int64())),
    ]
)


def _sketcher(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: (article_id, text) → (article_id, shingles, band keys)."""
    for batch in batches:
        rows = []
        for article_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            shingles, bands = near_dup.sketch(text)
            rows.append({"article_id": article_id, "shingles": shingles, "bands": bands})
        yield pa.RecordBatch.from_pylist(rows, schema=SKETCHED)


def near_duplicates(kept: DataFrame, similarity: float) -> DataFrame:
    """``(article_id, near_duplicate_of)`` for articles whose word 3-gram sets have Jaccard
    similarity ≥ ``similarity`` with an earlier-crawled article of the same run.

    MinHash LSH (``udfs.near_dup``): articles sharing a band key form a bucket; each member is
    compared with the bucket's earliest-crawled member only (linear in the bucket size, where all
    pairs would be quadratic), and points at the earliest such leader it really resembles.
    """
    order = sf.struct(sf.col("crawled_at").isNull(), "crawled_at", "warc_file", "record_offset")
    sketches = (
        kept.select("article_id", "text")
        .mapInArrow(_sketcher, from_arrow_schema(SKETCHED))
        .join(kept.select("article_id", order.alias("_order")), "article_id")
    )
    bucket = Window.partitionBy("_band", "_key").orderBy("_order")
    members = sketches.select("article_id", "_order", sf.posexplode("bands").alias("_band", "_key"))
    candidates = (
        members.withColumn("_leader", sf.first("article_id").over(bucket))
        .withColumn("_leader_order", sf.first("_order").over(bucket))
        .filter(sf.col("_leader") != sf.col("article_id"))
        .select("article_id", "_leader", "_leader_order")
        .distinct()
    )
    mine = sketches.select("article_id", sf.col("shingles").alias("_mine"))
    theirs = sketches.select(sf.col("article_id").alias("_leader"), sf.col("shingles").alias("_theirs"))
    jaccard = sf.size(sf.array_intersect("_mine", "_theirs")) / sf.size(sf.array_union("_mine", "_theirs"))
    similar = candidates.join(mine, "article_id").join(theirs, "_leader").filter(jaccard >= similarity)
    return similar.groupBy("article_id").agg(
        sf.min(sf.struct("_leader_order", "_leader"))["_leader"].alias("near_duplicate_of")
    )


def conform(df: DataFrame, spec: TableSpec) -> DataFrame:
    """``df`` with exactly the table's Spark schema, non-null columns included (Spark cannot
    narrow nullability itself; an Arrow pass-through with the declared schema does)."""
    return df.select(*spec.schema.names).mapInArrow(lambda batches: batches, spark_schema(spec))


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
    # Checkpointed (as is ``carried`` below): the writes replace partitions these rows come from,
    # so nothing downstream may re-read the table lazily.
    index = read_existing(spark, ARTICLES, root, INDEX_COLUMNS).localCheckpoint(eager=True)
    stored_files = [r["warc_file"] for r in index.select("warc_file").distinct().collect() if r["warc_file"]]
    own_stored = [f for f in stored_files if storage.normalize_uri(f) in own]
    is_own = sf.coalesce(sf.col("warc_file").isin(own_stored), sf.lit(False))
    before = index.where(is_own)
    old_dates = _count_by_date(before) if own_stored else {}

    persisted: list[DataFrame] = []
    try:
        fresh, table_dups = against_table(staged.where(sf.col("reason").isNull()), index.where(~is_own))
        kept, run_dups = deduplicate(fresh, n_parts)
        if near_duplicate_similarity is not None:
            persisted.append(kept.persist(StorageLevel.MEMORY_AND_DISK))  # read three times below
            marks = near_duplicates(kept, near_duplicate_similarity)
            kept = kept.drop("near_duplicate_of").join(marks, "article_id", "left")
        kept = kept.select(*ARTICLES.schema.names).persist(StorageLevel.MEMORY_AND_DISK)
        shards = spark.createDataFrame(
            [(f, rejected_shard(f)) for f in files], "warc_file string, shard string"
        )
        rejected = (
            staged.where(sf.col("reason").isNotNull())
            .select(*_REJECT_COLUMNS, sf.lit(None).cast("string").alias("duplicate_of"), "detail", "reason")
            .unionByName(table_dups)
            .unionByName(run_dups)
            .join(sf.broadcast(shards), "warc_file", "left")
        )
        rejected = conform(rejected.repartition(n_parts, "shard"), ARTICLES_REJECTED)
        persisted += [kept, rejected.persist(StorageLevel.MEMORY_AND_DISK)]
        new_dates, new_shards = _count(summary, kept, rejected, near_duplicate_similarity is not None)
        rewrite = new_dates | set(old_dates)
        others = index.where(~is_own & _partition_filter("published_date", rewrite)[0])
        carried_dates = _count_by_date(others)
        carried = kept.limit(0)
        if carried_dates:
            carried = read_existing(spark, ARTICLES, root, ARTICLES.schema.names, rewrite).where(~is_own)
            carried = carried.localCheckpoint(eager=True)
        if old_dates:
            _report_orphans(spark, root, before, kept, own, summary)

        # One writer task per date: one file per partition.
        articles = conform(kept.unionByName(carried).repartition(n_parts, "published_date"), ARTICLES)
        write_partitioned(articles, ARTICLES, root)
        emptied = rewrite - new_dates - set(carried_dates)
        _delete_partitions(ARTICLES, root, [_partition_dir("published_date", d) for d in emptied])
        write_partitioned(rejected, ARTICLES_REJECTED, root)
        stale = {f"shard={rejected_shard(f)}" for f in files} - {f"shard={s}" for s in new_shards}
        _delete_partitions(ARTICLES_REJECTED, root, stale & set(_partition_dirs(ARTICLES_REJECTED, root)))
    finally:
        for df in persisted:
            df.unpersist()
    summary.metrics["articles replaced (earlier runs of these files)"] = sum(old_dates.values())
    summary.metrics["articles of other files in rewritten dates"] = sum(carried_dates.values())
    summary.metrics["date partitions rewritten"] = len(rewrite)
    summary.metrics["date partitions emptied and removed"] = len(emptied)


def _count_by_date(df: DataFrame) -> dict:
    """``published_date → rows`` of ``df``."""
    return {r["published_date"]: r["count"] for r in df.groupBy("published_date").count().collect()}


def _report_orphans(
    spark: SparkSession, root: str, before: DataFrame, kept: DataFrame, own: set[str], summary: RunSummary
) -> None:
    """Count rejects of other files whose ``duplicate_of`` names an article this run removes.

    First ingested wins, so when a rerun drops an article (a narrower filter, an extractor
    change), its copies in other files stay rejected; the summary names those files, whose rerun
    brings the article back.
    """
    gone = before.select("article_id").subtract(kept.select("article_id"))
    if gone.isEmpty():
        return
    dups = read_existing(spark, ARTICLES_REJECTED, root, ("warc_file", "duplicate_of", "reason")).where(
        sf.col("reason").isin([reason for _, reason in DEDUP_KEYS])
    )
    orphans = dups.join(gone, dups["duplicate_of"] == gone["article_id"], "left_semi")
    counts = {r["warc_file"]: r["count"] for r in orphans.groupBy("warc_file").count().collect()}
    counts = {f: n for f, n in counts.items() if storage.normalize_uri(f) not in own}
    if counts:
        summary.metrics["duplicates elsewhere of articles removed by this run"] = sum(counts.values())
        summary.notes.append(
            "rerun these files to take their copies of removed articles: " + ", ".join(sorted(counts))
        )
        log.warning(
            "stage=dedup %d rejected copies in other files point at removed articles: %s",
            sum(counts.values()),
            sorted(counts),
        )


def _count(summary: RunSummary, kept: DataFrame, rejected: DataFrame, near: bool) -> tuple[set, set]:
    """Fill the summary from this run's rows (one aggregation per table), log rejections per
    shard (input file) and reason; return the dates and the shards the run produces."""
    per_shard = rejected.groupBy("warc_file", "shard", "reason").count().collect()
    for row in sorted(per_shard, key=lambda r: (r["warc_file"], r["reason"])):
        summary.reject(row["reason"], row["count"])
        stage = ARTICLE_REJECT_REASONS.get(row["reason"], ("?",))[0]
        log.info(
            "stage=%s shard=%s reason=%s rejected=%d", stage, row["warc_file"], row["reason"], row["count"]
        )
    unknown = set(summary.rejected) - set(ARTICLE_REJECT_REASONS)
    if unknown:
        raise RuntimeError(f"reasons outside ARTICLE_REJECT_REASONS: {sorted(unknown)}")
    groups = (
        kept.groupBy("published_date", "date_source")
        .agg(sf.count("*").alias("n"), sf.count("near_duplicate_of").alias("near"))
        .collect()
    )
    summary.rows_written = sum(g["n"] for g in groups)
    dated = sum(g["n"] for g in groups if g["published_date"] is not None)
    summary.metrics["articles dated"] = dated
    summary.metrics["articles undated"] = summary.rows_written - dated
    if near:
        summary.metrics["articles marked near-duplicate"] = sum(g["near"] for g in groups)
    by_source: Counter = Counter()
    for g in groups:
        by_source[g["date_source"] or "none"] += g["n"]
    for source, n in sorted(by_source.items()):
        summary.metrics[f"date source {source}"] = n
    return {g["published_date"] for g in groups}, {r["shard"] for r in per_shard}


# ---------------------------------------------------------------- one importer run

SCAN_BATCH_BYTES = 32 << 20  # a scan task flushes its rows at this many bytes of raw input


def stage_files(
    spark: SparkSession,
    files: list[str],
    scan: Callable[[str], Iterable[dict[str, Any]]],
    scan_schema: pa.Schema,
    size_column: str,
    scan_batch_rows: int,
    to_staged: Callable[[dict[str, Any]], dict[str, Any]],
    n_parts: int,
) -> DataFrame:
    """scan → spread → parse, as one lazy DataFrame of ``STAGED`` rows. One task per file streams
    ``scan(path)`` rows (flushed at ``SCAN_BATCH_BYTES`` of ``size_column`` or ``scan_batch_rows``
    rows), a hash repartition on (file, offset) spreads them over all cores, and ``to_staged``
    maps every row the scan did not already reject."""
    names = STAGED.names

    def scan_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                rows, size = [], 0
                for row in scan(files[index]):
                    rows.append(row)
                    size += len(row[size_column] or b"")
                    if size >= SCAN_BATCH_BYTES or len(rows) >= scan_batch_rows:
                        yield pa.RecordBatch.from_pylist(rows, schema=scan_schema)
                        rows, size = [], 0
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=scan_schema)

    def parse_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                staged = row if row["reason"] else to_staged(row)
                out.append({k: staged.get(k) for k in names})
            yield pa.RecordBatch.from_pylist(out, schema=STAGED)

    scanned = spark.range(len(files), numPartitions=len(files)).mapInArrow(
        scan_task, from_arrow_schema(scan_schema)
    )
    spread = scanned.repartition(n_parts, "warc_file", "record_offset")
    return spread.mapInArrow(parse_task, from_arrow_schema(STAGED))


def ingest_staged(
    spark: SparkSession,
    staged: DataFrame,
    files: list[str],
    root: str,
    n_parts: int,
    summary: RunSummary,
    near_duplicate_similarity: float | None = None,
) -> None:
    """Run the staged plan once (persisted: counting it and merging it must not scan and parse
    twice), then merge it into the tables; times both halves in ``summary``."""
    staged.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        started = time.time()
        summary.rows_read = staged.count()
        summary.metrics["seconds scan + parse"] = round(time.time() - started, 1)
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
