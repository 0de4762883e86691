"""Deduplication of one run's article candidates, on their keys only.

Exact duplicates are found by canonical URL, then by text hash: first against the articles the
table already holds from other files (the first ingested copy wins), then within the run (the
earliest crawl wins; file and offset break ties). Both steps work on ``KEY_COLUMNS``, a few short
columns per candidate: the page text never takes part in a join or a shuffle here, and the caller
takes the kept full rows back with one semi-join on (file, offset).

Near-duplicates (``near_duplicates``) are marked, not dropped: MinHash LSH on word 3-grams
(``udfs.near_dup``), with each text sketched once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_schema

from udfs import near_dup

DEDUP_KEYS = (("canonical_url", "duplicate_url"), ("text_hash", "duplicate_text"))
# The rejected-row columns a candidate carries (the rest are set by the dedup or the write).
REJECT_COLUMNS = ("warc_file", "warc_record_id", "record_offset", "url", "host", "crawled_at")
# What the dedup reads of a candidate: its ids, dedup keys, ordering keys and rejected-row columns.
KEY_COLUMNS = ("article_id", "canonical_url", "text_hash", *REJECT_COLUMNS)
# A candidate's identity within a run, for the semi-join back to full rows.
ROW_KEY = ("warc_file", "record_offset")


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
        *REJECT_COLUMNS,
        kept_id.alias("duplicate_of"),
        detail.alias("detail"),
        sf.lit(reason).alias("reason"),
    )


def against_table(candidates: DataFrame, others: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(fresh, duplicates)``: candidates (``KEY_COLUMNS``) whose canonical URL, then text hash,
    is already in the table (``others``: the index rows of other files) are duplicates of that
    article."""
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
    """``(kept, duplicates)`` within one run, on candidates' ``KEY_COLUMNS``: exact duplicates by
    canonical URL, then by text hash; the earliest crawl of each is kept."""
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
    pairs would be quadratic), and points at the earliest such leader it really resembles. Each
    text is sketched once (the sketches are kept while the three uses below read them); the result
    is materialised, so nothing downstream sketches again.
    """
    order = sf.struct(sf.col("crawled_at").isNull(), "crawled_at", "warc_file", "record_offset")
    sketches = (
        kept.select("article_id", "text")
        .mapInArrow(_sketcher, from_arrow_schema(SKETCHED))
        .join(kept.select("article_id", order.alias("_order")), "article_id")
        .persist(StorageLevel.MEMORY_AND_DISK)
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
    try:
        return (
            similar.groupBy("article_id")
            .agg(sf.min(sf.struct("_leader_order", "_leader"))["_leader"].alias("near_duplicate_of"))
            .localCheckpoint(eager=True)
        )
    finally:
        sketches.unpersist()
