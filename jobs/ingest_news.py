"""News WARC files → the ``articles`` table (and ``articles_rejected``), with Spark.

    spark-submit jobs/ingest_news.py --root s3://bucket/augury s3://commoncrawl/crawl-data/CC-NEWS/2022/09/*.warc.gz
    python -m jobs.ingest_news --root ./out --allow-hosts npr.org,cnn.com ../shared/data/warc/*.warc.gz

Stages (all names appear in the logs as ``stage=…``):

1. **scan**: one task per WARC file streams its records (FastWARC, ``udfs.warc``) and filters
   them on WARC and HTTP headers alone; every record that fails a filter becomes a rejected row.
2. **extract**: the default ``hybrid`` extractor (trafilatura's text, the page's own title and
   dates), ``trafilatura`` or ``newsplease``, then language and ids (``udfs.news_extract``). With
   at least as many files as cores, a file's pages are extracted inside the task that reads it;
   with fewer, the surviving records are first spread over all cores (hash on file and offset),
   so one large WARC is not extracted by one task.
3. **check**: when more than ``--max-failure-rate`` of the records that reached extraction failed
   (``extractor_error`` or ``corrupt_record``), the run stops before writing anything and names
   the likely cause (workers short of memory, damaged input).
4. **dedup**: exact duplicates by canonical URL, then by text hash, on key columns only, against
   the table (the first ingested copy wins) and within the run (the earliest crawl wins); then a
   semi-join takes the kept full rows. Optionally, near-duplicates within the run are marked.
5. **write**: the run's articles are added as new files in their ``published_date`` partitions and
   the files that held its input files' earlier rows are deleted (``jobs.articles_table``);
   rejected rows by ``shard`` (one per input file). The summary is printed and saved as
   ``corpus/articles/_SUCCESS.json`` under the root.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from jobs.articles_run import ingest_staged, record_run, row_partitions, stage_files
from jobs.spark import corpus_session, spark_session
from udfs import storage
from udfs.cli import InputError, option, run_cli
from udfs.layout import Layout
from udfs.news_extract import DEFAULT_EXTRACTOR, EXTRACTORS, ContentRules, process_candidate
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
SCAN_BATCH_ROWS = 256  # a scan batch flushes at this many rows (or SCAN_BATCH_BYTES of payload)
EXTRACT_BATCH_ROWS = 32  # rows per Arrow batch into the extractor when records are spread
FAILURES = ("extractor_error", "corrupt_record")  # what the failure-rate check counts
# Rejections decided on headers alone: those records never reached extraction.
HEADER_REASONS = (
    "unreadable_file",
    "not_response",
    "bad_url",
    "http_status",
    "not_html",
    "host",
    "warc_date",
)


@dataclass(frozen=True)
class Config:
    """Everything one run needs; every field is also a command-line option."""

    root: str = option(help="output root URI (a path, file:// or s3://); must not be a file")
    inputs: list[str] = option(
        default_factory=list,
        positional=True,
        help="WARC files or globs (local paths, file://, s3://, s3a://)",
    )
    manifest: str | None = option(None, help="file (local or S3) listing one WARC path or glob per line")
    extractor: str = option(
        DEFAULT_EXTRACTOR,
        choices=tuple(EXTRACTORS),
        help="hybrid: trafilatura's text with the page's own title and dates; trafilatura; "
        "newsplease (NewsPlease.from_html without images)",
    )
    allow_hosts: list[str] = option(default_factory=list, help="keep only these hosts and their subdomains")
    deny_hosts: list[str] = option(default_factory=list, help="drop these hosts and their subdomains")
    since: str | None = option(None, help="keep records with WARC-Date >= this (ISO date or time, UTC)")
    until: str | None = option(None, help="keep records with WARC-Date < this (ISO date or time, UTC)")
    languages: list[str] = option(default_factory=list, help="ISO 639-1 codes of the languages to keep")
    min_chars: int = option(200, min=0, help="minimum main-text length")
    near_duplicates: float | None = option(
        None, metavar="JACCARD", help="mark near-duplicates at this word-3-gram Jaccard similarity, e.g. 0.8"
    )
    partitions: int = option(
        0, min=0, help="extract partitions when records are spread (0: 4×cores, fewer for a small input)"
    )
    max_failure_rate: float = option(
        0.5,
        min=0,
        max=1,
        help="stop without writing when more than this share of the records that reached "
        "extraction failed (extractor_error, corrupt_record)",
    )

    def __post_init__(self) -> None:
        if not self.inputs and not self.manifest:
            raise ValueError("give WARC paths or globs, or --manifest")
        if self.extractor not in EXTRACTORS:
            raise ValueError(
                f"argument --extractor: {self.extractor!r} is not one of {', '.join(EXTRACTORS)}"
            )
        if self.near_duplicates is not None and not 0 < self.near_duplicates <= 1:
            raise ValueError("argument --near-duplicates: a Jaccard similarity in (0, 1]")
        if self.min_chars < 0 or self.partitions < 0:
            raise ValueError("--min-chars and --partitions must not be negative")
        if not 0 <= self.max_failure_rate <= 1:
            raise ValueError("argument --max-failure-rate: a share between 0 and 1")
        hf = self.header_filter()
        if hf.since and hf.until and hf.since >= hf.until:
            raise ValueError("--since must be before --until")

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


def _bound(value: str | None, name: str) -> dt.datetime | None:
    if not value:
        return None
    parsed = parse_warc_date(value)
    if parsed is None:
        raise ValueError(f"argument --{name}: {value!r} is not an ISO date or timestamp")
    return parsed


class TooManyFailuresError(RuntimeError):
    """Most records that reached extraction failed: the run stopped before writing."""


# ---------------------------------------------------------------- stages


def staged_records(
    spark: SparkSession, files: list[str], config: Config, now: dt.datetime, n_parts: int, spread: bool
) -> DataFrame:
    """scan → extract, as one lazy DataFrame of STAGED rows (one per WARC record)."""
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
        spread=spread,
    )


def failure_check(max_rate: float, extractor: str) -> Callable[[DataFrame], None]:
    """The check ``ingest_staged`` runs on the staged rows before writing (module docstring)."""

    def check(staged: DataFrame) -> None:
        by_reason = Counter({r["reason"]: r["count"] for r in staged.groupBy("reason").count().collect()})
        reached = sum(n for reason, n in by_reason.items() if reason not in HEADER_REASONS)
        failed = sum(by_reason[r] for r in FAILURES)
        if not reached or failed / reached <= max_rate:
            return
        details = (
            staged.where(sf.col("reason").isin(list(FAILURES)))
            .groupBy(sf.substring("detail", 1, 120).alias("detail"))
            .count()
            .orderBy(sf.desc("count"))
            .limit(3)
            .collect()
        )
        raise TooManyFailuresError(
            failure_message(failed, reached, max_rate, extractor, [d["detail"] for d in details])
        )

    return check


def failure_message(failed: int, reached: int, max_rate: float, extractor: str, details: list[str]) -> str:
    """One paragraph: how many failed, the likely cause and what to do."""
    text = " ".join(details).lower()
    if any(word in text for word in ("memoryerror", "cannot allocate memory", "out of memory")):
        cause = (
            "Python workers ran out of memory: Spark limits each worker's address space to "
            "spark.executor.pyspark.memory / spark.executor.cores; raise it or unset it "
            "(cluster/spark/spark-defaults.conf)"
        )
    elif "jieba" in text or "optional package" in text:
        cause = f"the {extractor} extractor lacks a language package: use --extractor hybrid or install it"
    elif all("unreadable" in d or "truncated" in d or "stream" in d for d in details):
        cause = "the input files are damaged or were cut short (an interrupted download?)"
    else:
        cause = f"the {extractor} extractor fails on these pages; try another --extractor"
    return (
        f"{failed} of {reached} records that reached extraction failed ({failed / reached:.0%} > "
        f"--max-failure-rate {max_rate:g}); nothing was written. Likely cause: {cause}. "
        f"Most common: {' | '.join(details)}"
    )


# ---------------------------------------------------------------- the job


def input_files(config: Config) -> list[str]:
    """The input files, checked before any work: a root that is a file, a pattern that matches
    nothing or an unsupported URI scheme is an ``InputError``."""
    Layout(config.root).check_root(must_exist=False)
    try:
        return storage.expand_inputs(config.inputs, config.manifest)
    except (FileNotFoundError, ValueError) as exc:
        raise InputError(str(exc)) from None


def run(config: Config, spark: SparkSession | None = None) -> RunSummary:
    """Ingest the WARC files of ``config`` into ``articles`` / ``articles_rejected`` under the root."""
    files = input_files(config)
    summary = RunSummary(name="ingest_news")
    spark = spark or spark_session("augury-ingest-news")
    cores = spark.sparkContext.defaultParallelism
    spread = len(files) < cores
    log.info(
        "stage=plan %d WARC files, %d cores, extract %s, extractor=%s, root=%s",
        len(files),
        cores,
        "spread over all cores" if spread else "in the scan tasks",
        config.extractor,
        config.root,
    )
    with corpus_session(spark, EXTRACT_BATCH_ROWS):
        n_parts = config.partitions or row_partitions(files, cores)
        staged = staged_records(spark, files, config, dt.datetime.now(dt.UTC), n_parts, spread)
        check = failure_check(config.max_failure_rate, config.extractor)
        ingest_staged(spark, staged, files, config.root, n_parts, summary, config.near_duplicates, check)
    summary.metrics["WARC files"] = len(files)
    summary.metrics["extraction"] = "spread over all cores" if spread else "in the scan tasks"
    summary.notes.append("rows read = WARC records seen + files that could not be read")
    return record_run(summary, config.root, config, files)


def main(argv: list[str] | None = None) -> None:
    try:
        summary = run_cli(Config, run, "ingest_news", __doc__.split("\n\n")[0], argv)
    except TooManyFailuresError as exc:
        print(f"ingest_news: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(summary.table())


if __name__ == "__main__":
    main()
