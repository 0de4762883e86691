"""What one article import run tells: its rows by date, source and reason, and the rejected
copies elsewhere that point at articles the run removed."""

from __future__ import annotations

import logging
from collections import Counter

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.articles_dedup import DEDUP_KEYS
from udfs import storage
from udfs.report import RunSummary
from udfs.schemas import ARTICLE_REJECT_REASONS

log = logging.getLogger("augury.articles")


def report_orphans(
    rejected_dups: DataFrame, before: DataFrame, kept: DataFrame, own: set[str], summary: RunSummary
) -> None:
    """Count rejects of other files whose ``duplicate_of`` names an article this run removes.

    First ingested wins, so when a rerun drops an article (a narrower filter, an extractor
    change), its copies in other files stay rejected; the summary names those files, whose rerun
    brings the article back.
    """
    gone = before.select("article_id").subtract(kept.select("article_id"))
    if gone.isEmpty():
        return
    dups = rejected_dups.where(sf.col("reason").isin([reason for _, reason in DEDUP_KEYS]))
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


def count_run(summary: RunSummary, kept: DataFrame, rejected: DataFrame, near: bool) -> tuple[dict, set]:
    """Fill the summary from this run's rows (one aggregation per table), log rejections per
    shard (input file) and reason; return the rows per date and the shards the run produces."""
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
    rows_by_date: Counter = Counter()
    for g in groups:
        rows_by_date[g["published_date"]] += g["n"]
    return dict(rows_by_date), {r["shard"] for r in per_shard}
