"""Arrow schemas of the corpus tables: the contract between the Spark jobs and every builder.

Each table has one schema, its partition columns and its place under the root URI. Spark
derives its StructType from these schemas, and a test checks that what Spark writes reads back
with exactly these types. Timestamps are UTC microseconds; dates are ``date32``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.dataset as ds

from udfs import storage
from udfs.layout import Layout

UTC_TS = pa.timestamp("us", tz="UTC")
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # the directory name of a partition column's null value


@dataclass(frozen=True)
class TableSpec:
    """Where a table lives under the root, its schema and its hive partition columns."""

    name: str
    path: str
    schema: pa.Schema
    partition_cols: tuple[str, ...] = ()

    def uri(self, root: str) -> str:
        return Layout(root).table(self)

    def read(self, root: str, **kwargs) -> pa.Table:
        return storage.read_table(self.uri(root), self.schema, self.partition_cols, **kwargs)

    def dataset(self, root: str) -> ds.Dataset:
        """The table as a dataset listed once: its partitions, counts and whole-table scans."""
        return storage.open_dataset(self.uri(root), self.schema, self.partition_cols)

    def read_partition(
        self,
        root: str,
        value: dt.date | str,
        columns: Sequence[str] | None = None,
        filter: ds.Expression | None = None,
    ) -> pa.Table:
        """The rows of one partition (``value`` of the table's one partition column) that match
        ``filter``, read from that partition's own directory, the partition column included when
        ``columns`` asks for it. One dataset reused for a loop over partitions keeps the metadata
        of every file it has read (about 70 KB a file: +70 MB over three years of days); this
        reads one day's files and forgets them."""
        (column,) = self.partition_cols
        names = list(columns) if columns is not None else self.schema.names
        key = value.isoformat() if isinstance(value, dt.date) else value
        table = storage.read_table(
            storage.join(self.uri(root), f"{column}={key}"),
            self.file_schema,
            columns=[c for c in names if c != column],
            filter=filter,
        )
        if column in names:
            field = self.schema.field(column)
            if value == HIVE_NULL:  # the partition of rows whose value is null
                value = None
            elif isinstance(value, str) and pa.types.is_date32(field.type):
                value = dt.date.fromisoformat(value)
            scalar = pa.scalar(value, field.type)
            table = table.append_column(field, pa.repeat(scalar, table.num_rows))
        return table.select(names)

    @property
    def file_schema(self) -> pa.Schema:
        """The schema of the Parquet files themselves (partition columns live in directory names)."""
        return pa.schema([f for f in self.schema if f.name not in self.partition_cols])


ARTICLES = TableSpec(
    name="articles",
    path="corpus/articles",
    partition_cols=("published_date",),
    schema=pa.schema(
        [
            pa.field("article_id", pa.string(), nullable=False),  # stable_id(canonical_url)
            pa.field("url", pa.string(), nullable=False),  # the crawled URL, cleaned of <…>
            pa.field("canonical_url", pa.string(), nullable=False),  # norm_url of the page's canonical
            pa.field("host", pa.string()),
            pa.field("title", pa.string()),
            pa.field("text", pa.string(), nullable=False),
            pa.field("published_at", UTC_TS),  # publisher-declared, never the crawl date
            pa.field("date_source", pa.string()),  # which signal gave published_at; null when undated
            pa.field("crawled_at", UTC_TS),  # WARC-Date
            pa.field("language", pa.string()),
            pa.field("n_chars", pa.int32(), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),  # of whitespace-normalised text
            pa.field("near_duplicate_of", pa.string()),  # article_id of the kept near-duplicate, if marked
            pa.field("warc_file", pa.string()),
            pa.field("warc_record_id", pa.string()),
            pa.field("extractor", pa.string(), nullable=False),
            pa.field("published_date", pa.date32()),  # partition; null → __HIVE_DEFAULT_PARTITION__
        ]
    ),
)

# Partitioned by input file (``shard``), so that a run replaces exactly the rejects of its own files.
ARTICLES_REJECTED = TableSpec(
    name="articles_rejected",
    path="corpus/articles_rejected",
    partition_cols=("shard",),
    schema=pa.schema(
        [
            pa.field("warc_file", pa.string(), nullable=False),  # URI of the input file
            pa.field("warc_record_id", pa.string()),
            pa.field("record_offset", pa.int64()),
            pa.field("url", pa.string()),
            pa.field("host", pa.string()),
            pa.field("crawled_at", UTC_TS),
            pa.field("detail", pa.string()),  # human-readable cause (exception text, status, MIME, …)
            pa.field("duplicate_of", pa.string()),  # article_id kept instead, for duplicates
            pa.field("reason", pa.string(), nullable=False),  # one of ARTICLE_REJECT_REASONS
            pa.field("shard", pa.string(), nullable=False),  # partition: hash of the file URI
        ]
    ),
)

# The fixed set of ``articles_rejected.reason`` values: reason → (stage that decides it, meaning).
ARTICLE_REJECT_REASONS: dict[str, tuple[str, str]] = {
    "unreadable_file": ("scan", "file cannot be opened or read, is empty, or no WARC / JSON Lines (one row)"),
    "corrupt_record": ("scan", "record truncated, or stream corrupt here (skipped to the next good record)"),
    "not_response": ("filter", "WARC-Type is not response (warcinfo, request, metadata, resource, …)"),
    "bad_url": ("filter", "target URI or JSON url is not an http(s) URL with a host (dns:, metadata:, …)"),
    "http_status": ("filter", "HTTP status is not 200, or the record has no HTTP response header"),
    "not_html": ("filter", "Content-Type is neither text/html nor application/xhtml+xml"),
    "host": ("filter", "host outside the allow-list, or inside the deny-list"),
    "warc_date": ("filter", "WARC-Date outside the --since/--until range, or missing while a range is set"),
    "empty": ("extract", "empty payload or document, or no main text (extractor result, JSON text field)"),
    "parse_error": ("extract", "payload cannot be decoded or parsed as HTML, or a line as a JSON object"),
    "extractor_error": ("extract", "the extractor raised an exception on this page"),
    "too_short": ("extract", "main text shorter than --min-chars"),
    "language": ("extract", "detected language not in --languages"),
    "duplicate_url": ("dedup", "canonical URL of an article kept before (duplicate_of names it)"),
    "duplicate_text": ("dedup", "text hash of an article kept before (duplicate_of names it)"),
}

SECTION = pa.struct(
    [
        pa.field("level", pa.int8()),
        pa.field("title", pa.string()),
        pa.field("text", pa.string()),
    ]
)

WIKI_PAGES = TableSpec(
    name="wiki_pages",
    path="corpus/wiki_pages",
    partition_cols=("dump",),
    schema=pa.schema(
        [
            pa.field("page_id", pa.int64(), nullable=False),
            pa.field("title", pa.string(), nullable=False),
            pa.field("ns", pa.int32(), nullable=False),
            pa.field("revision_id", pa.int64()),
            pa.field("revision_time", UTC_TS),
            pa.field("is_redirect", pa.bool_(), nullable=False),
            pa.field("redirect_target", pa.string()),
            pa.field("lead", pa.string()),  # plain text before the first heading
            pa.field("sections", pa.list_(SECTION)),  # plain text, in page order
            pa.field("categories", pa.list_(pa.string())),
            pa.field("n_words", pa.int32(), nullable=False),  # lead + section text
            pa.field("dump", pa.string(), nullable=False),  # partition: the dump file's stem
        ]
    ),
)

WCEP_EVENTS = TableSpec(
    name="wcep_events",
    path="corpus/wcep_events",
    partition_cols=("date",),
    schema=pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),  # stable_id(date, position, text)
            pa.field("position", pa.int32(), nullable=False),  # order of the bullet within its day
            pa.field("category", pa.string()),  # the bold heading above the bullet
            pa.field("story_path", pa.list_(pa.string())),  # parent story names, outermost first
            pa.field("story_links", pa.list_(pa.string())),  # wiki titles of those stories ("" if unlinked)
            pa.field("text", pa.string(), nullable=False),  # plain event text without citations
            pa.field("source_urls", pa.list_(pa.string())),
            pa.field("source_names", pa.list_(pa.string())),
            pa.field("source_format", pa.string(), nullable=False),  # "wikitext" or "html"
            pa.field("page_title", pa.string()),
            pa.field("date", pa.date32(), nullable=False),  # partition: the portal day
        ]
    ),
)

SOURCE_REJECTED = TableSpec(
    name="source_rejected",
    path="corpus/source_rejected",
    partition_cols=("source", "input"),
    schema=pa.schema(
        [
            pa.field("item", pa.string()),  # page title, day page, feed item, file name, …
            pa.field("reason", pa.string(), nullable=False),  # one of SOURCE_REJECT_REASONS
            pa.field("detail", pa.string()),
            pa.field(
                "source", pa.string(), nullable=False
            ),  # partition: wiki_pages, wcep_wikitext, wcep_html
            pa.field("input", pa.string(), nullable=False),  # partition: stem of the input file
        ]
    ),
)

# The fixed set of ``source_rejected.reason`` values: reason → (sources that use it, meaning).
SOURCE_REJECT_REASONS: dict[str, tuple[str, str]] = {
    "malformed_xml": (
        "wiki_pages",
        "the <page> element is not well-formed XML or its fields have the wrong type",
    ),
    "missing_field": ("wiki_pages", "the page has no id, title or namespace"),
    "damaged_file": (
        "wiki_pages, wcep_html",
        "the file (or a dump chunk) cannot be read to the end; the pages after the damage are lost",
    ),
    "unreadable_file": (
        "wiki_pages, wcep_html",
        "nothing in the file (or dump chunk) could be read: missing, not bz2/gzip, or damaged",
    ),
    "no_pages": ("wiki_pages", "the file (or dump chunk) holds no <page> element: not a MediaWiki export"),
    "no_text": ("wiki_pages", "the page has no <text>, its text was deleted, or it is empty"),
    "malformed_record": ("wcep_html", "a JSON line or feed item that does not parse"),
    "parse_error": ("all", "the parser raised an exception on this page"),
    "redirect": ("wcep_wikitext", "the day page is a redirect"),
    "bad_date": (
        "wcep_wikitext, wcep_html",
        "the day page title or the record's date field is no valid date",
    ),
    "unknown_layout": ("wcep_wikitext, wcep_html", "the day page matches no known layout"),
    "no_events": ("wcep_wikitext, wcep_html", "the day page has a known layout but no event bullet"),
    "empty_page": ("wcep_html", "the record holds no HTML"),
    "no_date": ("wcep_html", "neither the page, the record nor its title names the day"),
    "date_mismatch": ("wcep_html", "the page's own date differs from the record's date"),
    "duplicate_day": (
        "wcep_wikitext, wcep_html",
        "another copy of the same day was captured later and is kept",
    ),
}

CORPUS_TABLES = {t.name: t for t in (ARTICLES, ARTICLES_REJECTED, WIKI_PAGES, WCEP_EVENTS, SOURCE_REJECTED)}
