"""What the article index holds for one article: pure functions over Arrow batches.

An index document is a dated article's id, publication time and day, host, title, its
retrieval text (the title and the lead: the first ``lead_words`` words of the body) and the id of
the article it nearly duplicates, if the corpus marked one. Undated
articles never enter the index, so no search can return one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc

from udfs.schemas import UTC_TS
from udfs.text import first_words
from udfs.timeutil import to_utc

ARTICLE_COLUMNS = ["article_id", "published_at", "host", "title", "text", "near_duplicate_of"]


def index_schema(dim: int) -> pa.Schema:
    """The index table: one row per dated article, with its ``dim``-dimensional embedding."""
    return pa.schema(
        [
            pa.field("article_id", pa.string(), nullable=False),
            pa.field("published_at", UTC_TS, nullable=False),
            pa.field("published_date", pa.date32(), nullable=False),
            pa.field("host", pa.string()),
            pa.field("title", pa.string()),
            pa.field("text", pa.string(), nullable=False),  # title + lead: what BM25 and the encoder see
            pa.field("near_duplicate_of", pa.string()),  # the kept article this one nearly repeats
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ]
    )


def documents(batch: pa.Table, lead_words: int) -> pa.Table:
    """Index documents (all columns but ``vector``) of the dated articles of ``batch``."""
    dated = batch.filter(pc.is_valid(batch["published_at"]))
    published = dated["published_at"].cast(UTC_TS)
    texts = [
        " ".join(p for p in (title or "", first_words(text or "", lead_words)) if p)
        for title, text in zip(dated["title"].to_pylist(), dated["text"].to_pylist(), strict=True)
    ]
    return pa.table(
        {
            "article_id": dated["article_id"],
            "published_at": published,
            "published_date": pc.cast(published, pa.date32()),
            "host": dated["host"],
            "title": dated["title"],
            "text": pa.array(texts, pa.string()),
            "near_duplicate_of": dated["near_duplicate_of"],
        }
    )


def cutoff_filter(cutoff: dt.date | dt.datetime, since: dt.date | dt.datetime | None = None) -> str:
    """The engine's prefilter for ``[since, cutoff)``: a date is its midnight UTC, a naive time is
    UTC, an aware time is converted to UTC; microseconds are kept."""
    clauses = [f"published_at < {_timestamp(cutoff)}"]
    if since is not None:
        clauses.append(f"published_at >= {_timestamp(since)}")
    return " AND ".join(clauses)


def eligible(
    cutoff: dt.date | dt.datetime,
    since: dt.date | dt.datetime | None = None,
    exclude: Collection[str] = (),
    within: Collection[str] | None = None,
    distinct: bool = False,
) -> str:
    """The whole prefilter of a search: the window, minus ``exclude``, inside ``within`` when
    given, without marked near-duplicates when ``distinct``."""
    clauses = [cutoff_filter(cutoff, since)]
    if exclude:
        clauses.append(f"article_id NOT IN ({quoted_list(sorted(exclude))})")
    if within is not None:
        clauses.append(f"article_id IN ({quoted_list(sorted(within))})")
    if distinct:
        clauses.append("near_duplicate_of IS NULL")
    return " AND ".join(clauses)


def _timestamp(when: dt.date | dt.datetime) -> str:
    iso = to_utc(when).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"arrow_cast('{iso}Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"


def quoted_list(values: list[str]) -> str:
    """A SQL list of string literals (``'a', 'b'``), quotes doubled."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)
