"""News WARC files → the ``articles`` table (and ``articles_rejected``), with Spark.

    spark-submit jobs/ingest_news.py --root s3://bucket/augury s3://commoncrawl/crawl-data/CC-NEWS/2022/09/*.warc.gz
    python -m jobs.ingest_news --root ./out --allow-hosts npr.org,cnn.com ../shared/data/warc/*.warc.gz

Stages (all names appear in the logs as ``stage=…``):

1. **scan**: one task per WARC file streams its records with warcio and filters them on WARC and
   HTTP headers alone (``udfs.warc``). Survivors keep their raw HTML; every other record becomes
   a rejected row.
2. **spread**: the rows are hash-repartitioned on (file, offset) over all cores, so one large
   WARC is extracted in parallel instead of by the single task that read it.
3. **extract**: news-please or trafilatura, publish date, language, ids (``udfs.news_extract``).
4. **dedup**: exact duplicates by canonical URL, then by text hash, against the articles already in
   the table from other files (the first ingested copy wins) and within the run (the earliest
   crawl wins, ties broken by file and offset); the others are rejected with ``duplicate_of``.
   Optionally, near-duplicates within the run are marked (MinHash LSH on word 3-grams,
   ``udfs.near_dup``) in ``near_duplicate_of``; they stay in the table.
5. **write**: articles partitioned by ``published_date`` (undated: the null partition), rejected
   rows by ``shard`` (one per input file). The run is authoritative for its input files: their
   earlier rows are replaced and rows of other files are kept, so batches of WARC files can be
   ingested one after another (``jobs.articles_table``). The run summary is printed and saved
   as ``corpus/articles/_SUCCESS.json`` under the root.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from jobs.articles_table import ingest_staged, record_run, stage_files
from jobs.spark import corpus_session, spark_session
from udfs import storage
from udfs.news_extract import EXTRACTORS, ContentRules, process_candidate
from udfs.report import RunSummary
from udfs.schemas import ARTICLES
from udfs.warc import HeaderFilter, normalize_host, parse_warc_date, scan_file

log = logging.getLogger("augury.ingest_news")

# Rows the scan stage emits: a candidate (reason null, payload set) or a rejected record.
SCANNED = pa.schema(
    [
        pa.field("warc_file", pa.string()),
        pa.field("warc_record_id", pa.string()),
        pa.field("record_offset", pa.int64()),
        pa.field("url", pa.string()),
        pa.field("host", pa.string()),
        pa.field("crawled_at", ARTICLES.schema.field("crawled_at").type),
        pa.field("payload", pa.binary()),
        pa.field("charset", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
    ]
)
SCAN_BATCH_ROWS = 2048  # a scan batch flushes at this many rows (or SCAN_BATCH_BYTES of payload)
EXTRACT_BATCH_ROWS = 32  # rows per Arrow batch into and out of the extractor (HTML is large)


@dataclass
class Config:
    """Everything one run needs; the command-line options map one to one."""

    inputs: list[str]
    root: str
    manifest: str | None = None
    extractor: str = "newsplease"
    allow_hosts: list[str] = field(default_factory=list)
    deny_hosts: list[str] = field(default_factory=list)
    since: str | None = None  # WARC-Date lower bound (inclusive), ISO date or timestamp, UTC
    until: str | None = None  # WARC-Date upper bound (exclusive)
    languages: list[str] = field(default_factory=list)
    min_chars: int = 200
    near_duplicates: float | None = None  # Jaccard similarity threshold; None turns marking off
    partitions: int = 0  # extract partitions; 0 = max(4 × cores, number of files)

    def header_filter(self) -> HeaderFilter:
        return HeaderFilter(
            allow_hosts=frozenset(normalize_host(h) for h in self.allow_hosts if h.strip()),
            deny_hosts=frozenset(normalize_host(h) for h in self.deny_hosts if h.strip()),
            since=_bound(self.since, "since"),
            until=_bound(self.until, "until"),
        )

    def content_rules(self) -> ContentRules:
        return ContentRules(
            extractor=self.extractor,
            min_chars=self.min_chars,
            languages=frozenset(lang.strip().lower() for lang in self.languages if lang.strip()),
        )

    def validate(self) -> None:
        if self.extractor not in EXTRACTORS:
            raise ValueError(f"extractor must be one of {sorted(EXTRACTORS)}, not {self.extractor!r}")
        if self.near_duplicates is not None and not 0 < self.near_duplicates <= 1:
            raise ValueError("near_duplicates is a Jaccard similarity in (0, 1]")
        if self.min_chars < 0 or self.partitions < 0:
            raise ValueError("min_chars and partitions must not be negative")
        hf = self.header_filter()
        if hf.since and hf.until and hf.since >= hf.until:
            raise ValueError("since must be before until")


def _bound(value: str | None, name: str) -> dt.datetime | None:
    if not value:
        return None
    parsed = parse_warc_date(value)
    if parsed is None:
        raise ValueError(f"--{name} {value!r} is not an ISO date or timestamp")
    return parsed


# ---------------------------------------------------------------- stages


def staged_records(
    spark: SparkSession, files: list[str], config: Config, now: dt.datetime, n_parts: int
) -> DataFrame:
    """scan → spread → extract, as one lazy DataFrame of STAGED rows (one per WARC record)."""
    header_filter, rules = config.header_filter(), config.content_rules()
    return stage_files(
        spark,
        files,
        scan=lambda path: scan_file(path, header_filter),
        scan_schema=SCANNED,
        size_column="payload",
        scan_batch_rows=SCAN_BATCH_ROWS,
        to_staged=lambda row: process_candidate(row, rules, now),
        n_parts=n_parts,
    )


# ---------------------------------------------------------------- the job


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Ingest the WARC files of ``config`` into ``articles`` / ``articles_rejected`` under the root."""
    config.validate()
    summary = RunSummary(name="ingest_news")
    files = storage.expand_inputs(config.inputs, config.manifest)
    log.info("stage=plan %d WARC files, extractor=%s, root=%s", len(files), config.extractor, config.root)
    spark = spark or spark_session("augury-ingest-news")
    with corpus_session(spark, EXTRACT_BATCH_ROWS):
        n_parts = config.partitions or max(4 * spark.sparkContext.defaultParallelism, len(files))
        staged = staged_records(spark, files, config, dt.datetime.now(dt.UTC), n_parts)
        ingest_staged(spark, staged, files, config.root, n_parts, summary, config.near_duplicates)
    summary.metrics["WARC files"] = len(files)
    summary.notes.append("rows read = WARC records seen + files that could not be read")
    return record_run(summary, config.root, config, files)


# ---------------------------------------------------------------- command line


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(prog="ingest_news", description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="*", help="WARC files or globs (local, s3://, s3a://)")
    p.add_argument("--root", required=True, help="output root URI (path, file://, s3://)")
    p.add_argument("--manifest", help="file listing one WARC path or glob per line (# comments)")
    p.add_argument("--extractor", choices=sorted(EXTRACTORS), default="newsplease")
    p.add_argument("--allow-hosts", type=_csv, default=[], help="comma-separated; subdomains match")
    p.add_argument("--deny-hosts", type=_csv, default=[], help="comma-separated; subdomains match")
    p.add_argument("--since", help="keep records with WARC-Date >= this (ISO date/time, UTC)")
    p.add_argument("--until", help="keep records with WARC-Date < this (ISO date/time, UTC)")
    p.add_argument("--languages", type=_csv, default=[], help="comma-separated ISO 639-1 codes to keep")
    p.add_argument("--min-chars", type=int, default=200, help="minimum main-text length (default 200)")
    p.add_argument(
        "--near-duplicates",
        type=float,
        nargs="?",
        const=0.8,
        metavar="JACCARD",
        help="mark near-duplicates at this word-3-gram Jaccard similarity (flag alone: 0.8)",
    )
    p.add_argument(
        "--partitions", type=int, default=0, help="extract partitions (default max(4×cores, files))"
    )
    args = p.parse_args(argv)
    if not args.inputs and not args.manifest:
        p.error("give WARC paths/globs or --manifest")
    return Config(**vars(args))


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    summary = run(parse_args(argv))
    print(summary.table())


if __name__ == "__main__":
    main()
