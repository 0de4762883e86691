"""Arrow schemas of the corpus tables: the contract between the Spark jobs and every builder.

Each table has one schema, its partition columns and its place under the root URI. Spark
derives its StructType from these schemas, and a test checks that what Spark writes reads back
with exactly these types. Timestamps are UTC microseconds; dates are ``date32``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from udfs import storage

UTC_TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class TableSpec:
    """Where a table lives under the root, its schema and its hive partition columns."""

    name: str
    path: str
    schema: pa.Schema
    partition_cols: tuple[str, ...] = ()

    def uri(self, root: str) -> str:
        return storage.join(root, self.path)

    def read(self, root: str, **kwargs) -> pa.Table:
        return storage.read_table(self.uri(root), self.schema, self.partition_cols, **kwargs)

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

ARTICLES_REJECTED = TableSpec(
    name="articles_rejected",
    path="corpus/articles_rejected",
    partition_cols=("reason",),
    schema=pa.schema(
        [
            pa.field("warc_file", pa.string()),
            pa.field("warc_record_id", pa.string()),
            pa.field("record_offset", pa.int64()),
            pa.field("url", pa.string()),
            pa.field("host", pa.string()),
            pa.field("crawled_at", UTC_TS),
            pa.field("detail", pa.string()),  # human-readable cause (exception text, status, MIME, …)
            pa.field("duplicate_of", pa.string()),  # article_id kept instead, for duplicates
            pa.field("reason", pa.string(), nullable=False),  # partition
        ]
    ),
)

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
    partition_cols=("source",),
    schema=pa.schema(
        [
            pa.field("item", pa.string()),  # page title, day, file name, …
            pa.field("reason", pa.string(), nullable=False),
            pa.field("detail", pa.string()),
            pa.field(
                "source", pa.string(), nullable=False
            ),  # partition: wiki_pages, wcep_wikitext, wcep_html
        ]
    ),
)

CORPUS_TABLES = {t.name: t for t in (ARTICLES, ARTICLES_REJECTED, WIKI_PAGES, WCEP_EVENTS, SOURCE_REJECTED)}
