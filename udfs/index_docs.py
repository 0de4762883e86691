"""What the article index holds for one article: pure functions over Arrow batches.

An index document is a dated article's id, publication time and day, host, title, its
retrieval text (``udfs.text.headline``: the title and the lead, the first ``lead_words`` words of
the body) and the id of the article it nearly duplicates, if the corpus marked one. A passage document is a piece of the
body of at most N words that keeps paragraphs whole where they fit. Undated articles never enter
the index, so no search can return one. Strict statistics are per-day term document frequencies
and day sizes of the article documents (``term_statistics``), summed over a window at query time.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc

from udfs.cli import InputError
from udfs.schemas import UTC_TS
from udfs.text import headline
from udfs.timeutil import to_utc

_TERM = re.compile(r"[^\W_]+")
MAX_TERM = 40
TERM_DAYS = pa.schema(
    [
        pa.field("published_date", pa.date32(), nullable=False),
        pa.field("term", pa.string(), nullable=False),
        pa.field("df", pa.int64(), nullable=False),
    ]
)
DAY_SIZES = pa.schema(
    [
        pa.field("published_date", pa.date32(), nullable=False),
        pa.field("docs", pa.int64(), nullable=False),
        pa.field("tokens", pa.int64(), nullable=False),
    ]
)
ARTICLE_COLUMNS = ["article_id", "published_at", "host", "title", "text", "near_duplicate_of"]
_PARTITION = r"published_date=(?P<day>\d{4}-\d{2}-\d{2})"


def index_schema(dim: int | None, passages: bool = False) -> pa.Schema:
    """The index table: one row per dated article (or per passage of one), with its
    ``dim``-dimensional embedding (``None``: no embedding, a full-text-only passage table)."""
    vector = [pa.field("vector", pa.list_(pa.float32(), dim), nullable=False)] if dim else []
    return pa.schema(
        [pa.field("passage_id", pa.string(), nullable=False)] * passages
        + [
            pa.field("article_id", pa.string(), nullable=False),
            pa.field("published_at", UTC_TS, nullable=False),
            pa.field("published_date", pa.date32(), nullable=False),
            pa.field("host", pa.string()),
            pa.field("title", pa.string()),
            pa.field(
                "text", pa.string(), nullable=False
            ),  # title + lead, or the passage: what BM25 and the encoder see
            pa.field("near_duplicate_of", pa.string()),  # the kept article this one nearly repeats
        ]
        + vector
    )


def documents(batch: pa.Table, lead_words: int) -> pa.Table:
    """Index documents (all columns but ``vector``) of the dated articles of ``batch``."""
    dated = batch.filter(pc.is_valid(batch["published_at"]))
    published = dated["published_at"].cast(UTC_TS)
    texts = [
        headline(title, text, lead_words)
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


def check_partitions(batch: pa.Table) -> pa.Table:
    """``batch`` (articles read with their file's ``path``) without that column, once every dated
    article in it sits in the partition of its UTC publication day. The index replaces a day's
    rows by partition: an article filed under another day would stay behind when its partition
    is rewritten (then be there twice) or removed, and be counted in another day's strict
    statistics, where a later article can reach a window it must not."""
    day = pc.cast(pc.struct_field(pc.extract_regex(batch["path"], _PARTITION), "day"), pa.date32())
    utc_day = pc.cast(batch["published_at"].cast(UTC_TS), pa.date32())
    wrong = pc.fill_null(pc.not_equal(utc_day, day), False)
    if pc.any(wrong).as_py():
        bad = batch.filter(wrong)
        first = bad.slice(0, 1).to_pylist()[0]
        raise InputError(
            f"{bad.num_rows} article(s) sit in a partition other than their UTC publication day, "
            f"e.g. {first['article_id']} published {to_utc(first['published_at']).isoformat()} in "
            f"{first['path']}: write each article under published_date=<the UTC day of its "
            "published_at> (the corpus jobs do), then rerun the index job"
        )
    return batch.drop_columns(["path"])


def pack_passages(text: str, words: int) -> list[str]:
    """The body cut into passages of at most ``words`` words that keep paragraphs whole where
    they fit: paragraphs are packed in order, a longer paragraph is split."""
    passages: list[str] = []
    current: list[str] = []
    for paragraph in (text or "").split("\n"):
        tokens = paragraph.split()
        if current and len(current) + len(tokens) > words:
            passages.append(" ".join(current))
            current = []
        while len(tokens) > words:
            passages.append(" ".join(tokens[:words]))
            tokens = tokens[words:]
        current += tokens
    if current:
        passages.append(" ".join(current))
    return passages


_PASSAGE_SUFFIX = re.compile(r"#\d+$")


def passage_id(article_id: str, n: int) -> str:
    """The id of an article's ``n``-th passage."""
    return f"{article_id}#{n}"


def article_of(doc_id: str) -> str:
    """The article of an index document id: a passage ``<article>#<n>`` → ``<article>``; an
    article id is itself."""
    return _PASSAGE_SUFFIX.sub("", doc_id)


def passages(batch: pa.Table, words: int) -> pa.Table:
    """Passage documents of the dated articles of ``batch``: ``passage_id`` (``<article>#<n>``),
    the article's fields and the passage as ``text``."""
    dated = batch.filter(pc.is_valid(batch["published_at"]))
    chunks = [pack_passages(t, words) for t in dated["text"].to_pylist()]
    owner = pa.array([i for i, c in enumerate(chunks) for _ in c], pa.int64())
    rows = dated.take(owner)
    published = rows["published_at"].cast(UTC_TS)
    ids = [
        passage_id(a, n)
        for a, c in zip(dated["article_id"].to_pylist(), chunks, strict=True)
        for n in range(len(c))
    ]
    return pa.table(
        {
            "passage_id": pa.array(ids, pa.string()),
            "article_id": rows["article_id"],
            "published_at": published,
            "published_date": pc.cast(published, pa.date32()),
            "host": rows["host"],
            "title": rows["title"],
            "text": pa.array([p for c in chunks for p in c], pa.string()),
            "near_duplicate_of": rows["near_duplicate_of"],
        }
    )


def terms(text: str) -> list[str]:
    """The terms strict statistics count: lowercase runs of letters and digits, at most 40
    characters (the engine's full-text tokenizer splits the same way)."""
    return [t for t in _TERM.findall((text or "").lower()) if len(t) <= MAX_TERM]


def term_statistics(docs: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Per-day statistics of a batch of index documents, the parts strict BM25 sums over a
    window: (``published_date, term, df``) and (``published_date, docs, tokens``). Rows of
    several batches for one day would add up (the index job counts each day whole)."""
    days = docs["published_date"].to_pylist()
    pairs_day, pairs_term, lengths = [], [], []
    for day, text in zip(days, docs["text"].to_pylist(), strict=True):
        tokens = terms(text)
        lengths.append(len(tokens))
        unique = set(tokens)
        pairs_term += unique
        pairs_day += [day] * len(unique)
    df = (
        pa.table(
            {"published_date": pa.array(pairs_day, pa.date32()), "term": pa.array(pairs_term, pa.string())}
        )
        .group_by(["published_date", "term"])
        .aggregate([([], "count_all")])
        .rename_columns(["published_date", "term", "df"])
    )
    sizes = (
        pa.table({"published_date": docs["published_date"], "tokens": pa.array(lengths, pa.int64())})
        .group_by("published_date")
        .aggregate([([], "count_all"), ("tokens", "sum")])
    )
    return (
        df.select(["published_date", "term", "df"]).cast(TERM_DAYS),
        pa.table(
            {
                "published_date": sizes["published_date"],
                "docs": sizes["count_all"],
                "tokens": sizes["tokens_sum"],
            }
        ).cast(DAY_SIZES),
    )


def cutoff_filter(cutoff: dt.date | dt.datetime, since: dt.date | dt.datetime | None = None) -> str:
    """The engine's prefilter for ``[since, cutoff)``: a date is its midnight UTC, a naive time is
    UTC, an aware time is converted to UTC; microseconds are kept."""
    clauses = [f"published_at < {timestamp_literal(cutoff)}"]
    if since is not None:
        clauses.append(f"published_at >= {timestamp_literal(since)}")
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


def timestamp_literal(when: dt.date | dt.datetime) -> str:
    """A UTC microsecond timestamp literal for the engine's SQL filters."""
    iso = to_utc(when).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"arrow_cast('{iso}Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"


def quoted_list(values: list[str]) -> str:
    """A SQL list of string literals (``'a', 'b'``), quotes doubled."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)
