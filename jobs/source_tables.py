"""The row contract between the source parsers and the corpus tables they feed.

The dump reader (``jobs.ingest_wikipedia``) and the rendered-HTML reader (``jobs.ingest_wcep_html``)
run a Python parser over their inputs (dump chunks, input files) with ``mapInArrow``. Both emit rows of one Arrow schema,
``PARSED``: a ``kind`` and the struct of that kind — a wiki page, a WCEP event, a parsed day page
(used to keep one copy per day) or a rejected item. Parsing runs once; the persisted result is then
split into the tables. This module also writes the ``wcep_events`` / ``source_rejected`` tables
the two readers share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import from_arrow_schema

from jobs.spark import spark_schema, write_partitioned
from udfs import storage, wcep
from udfs.report import RunSummary
from udfs.schemas import SOURCE_REJECTED, UTC_TS, WCEP_EVENTS, WIKI_PAGES, TableSpec

PAGE, EVENT, DAY, REJECT = "page", "event", "day", "reject"
BATCH_ROWS = 256  # rows per Arrow batch handed back to Spark (pages can be large)


def _nullable_struct(schema: pa.Schema) -> pa.StructType:
    """A table schema as a struct whose fields all accept null (the struct is null for other kinds)."""
    return pa.struct([f.with_nullable(True) for f in schema])


PARSED = pa.schema(
    [
        pa.field("kind", pa.string()),  # page | event | day | reject
        pa.field("input", pa.string()),  # stem of the input file the row came from
        pa.field("item", pa.string()),  # day rows: the page title or feed item
        pa.field("day", pa.date32()),  # day rows: the portal day
        pa.field("captured_at", UTC_TS),  # day rows: revision or feed time of this copy
        pa.field("layout", pa.string()),  # day rows: the page layout the parser recognised
        pa.field("page", _nullable_struct(WIKI_PAGES.schema)),
        pa.field("event", _nullable_struct(WCEP_EVENTS.schema)),
        pa.field("reject", _nullable_struct(SOURCE_REJECTED.schema)),
    ]
)
PARSED_SPARK = from_arrow_schema(PARSED)


def reject_row(source: str, input_stem: str, item: str | None, reason: str, detail: str | None) -> dict:
    """A parsed row for one rejected item (``reason`` from ``SOURCE_REJECT_REASONS``)."""
    return {
        "kind": REJECT,
        "input": input_stem,
        "reject": {
            "item": item,
            "reason": reason,
            "detail": detail[:1000] if detail else detail,
            "source": source,
            "input": input_stem,
        },
    }


def day_rows(
    input_stem: str,
    item: str,
    captured_at: datetime | None,
    day: date,
    layout: str,
    events: list[wcep.Event],
    source_format: str,
) -> list[dict]:
    """The event rows of one parsed day page plus the day row that stands for the page."""
    rows = [
        {"kind": EVENT, "input": input_stem, "event": e} for e in wcep.event_rows(day, events, source_format)
    ]
    rows.append(
        {
            "kind": DAY,
            "input": input_stem,
            "item": item,
            "day": day,
            "captured_at": captured_at,
            "layout": layout,
        }
    )
    return rows


def to_batches(rows: Iterable[dict]) -> Iterator[pa.RecordBatch]:
    """Pack parsed rows into ``PARSED`` record batches of at most ``BATCH_ROWS`` rows."""
    chunk: list[dict] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= BATCH_ROWS:
            yield pa.RecordBatch.from_pylist(chunk, schema=PARSED)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=PARSED)


def snippet(text: str | None, limit: int = 300) -> str | None:
    """The start of a long text on one line, for a rejected row's detail."""
    return " ".join(text.split())[:limit] if text else text


@dataclass
class Parsed:
    """The persisted parser output and what was counted while computing it."""

    df: DataFrame
    counts: Counter  # (kind, reject source, reject reason) → rows

    def count(self, kind: str, source: str | None = None) -> int:
        return sum(n for (k, s, _), n in self.counts.items() if k == kind and (source is None or s == source))

    def reasons(self, source: str) -> Counter:
        return Counter({r: n for (k, s, r), n in self.counts.items() if k == REJECT and s == source})


def parse_frame(
    raw: DataFrame, parse: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
) -> Parsed:
    """Run ``parse`` (a ``mapInArrow`` body giving ``PARSED`` rows) over ``raw`` once, persist the
    result and count its rows by kind and rejection reason."""
    df = raw.mapInArrow(parse, PARSED_SPARK).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = df.groupBy("kind", "reject.source", "reject.reason").count().collect()
    except Exception:
        df.unpersist()
        raise
    counts = Counter({(r["kind"], r["source"], r["reason"]): r["count"] for r in rows})
    return Parsed(df, counts)


# ---------------------------------------------------------------- outputs


def write_wcep(
    spark: SparkSession,
    parsed: Parsed,
    root: str,
    source: str,
    summary: RunSummary,
) -> None:
    """Write ``wcep_events`` (one copy per day, the latest) and ``source_rejected``, and fill
    ``summary`` with day pages read / kept / rejected and events written.

    Every rejected row the parser emitted (pages, day pages and damaged files alike) is written
    here, with the ``duplicate_day`` rows of the copies not kept.
    """
    df = parsed.df
    days = df.where(sf.col("kind") == DAY).select("input", "item", "day", "captured_at", "layout").collect()
    captures = [wcep.DayCapture(r["day"], r["input"], r["item"], r["captured_at"]) for r in days]
    kept, dropped = wcep.pick_latest(captures)
    duplicates = [
        reject_row(
            source,
            lost.input,
            lost.item,
            "duplicate_day",
            f"{lost.day}: kept the copy from {winner.input} captured at {winner.captured_at}",
        )["reject"]
        for lost, winner in dropped
    ]
    winners = spark.createDataFrame([(c.day, c.input) for c in kept], "day date, input string")
    events = (
        df.where(sf.col("kind") == EVENT)
        .join(
            sf.broadcast(winners),
            (sf.col("event.date") == winners["day"]) & (df["input"] == winners["input"]),
            "left_semi",
        )
        .select("event.*")
    )
    write_partitioned(events, WCEP_EVENTS, root)
    rejects = df.where(sf.col("kind") == REJECT).select("reject.*")
    if duplicates:
        rejects = rejects.unionByName(spark.createDataFrame(duplicates, spark_schema(SOURCE_REJECTED)))
    write_partitioned(rejects, SOURCE_REJECTED, root)

    summary.rows_read = len(captures) + parsed.count(REJECT, source)
    summary.rows_written = len(kept)
    summary.rejected.update(parsed.reasons(source))
    if duplicates:
        summary.reject("duplicate_day", len(duplicates))
    summary.metrics["events written"] = events.count()
    kept_keys = {(c.day, c.input) for c in kept}
    layouts = Counter(r["layout"] for r in days if (r["day"], r["input"]) in kept_keys)
    for layout, n in sorted(layouts.items()):
        summary.metrics[f"days in layout {layout}"] = n


def report(root: str, job: str, inputs: list[str], done: list[tuple[TableSpec, RunSummary]]) -> None:
    """Print each summary as a table and store it, with the job and its inputs, as the completion
    marker (``_SUCCESS.json``) of the table it describes."""
    for spec, summary in done:
        summary.finish()
        print(summary.table())
        storage.mark_done(spec.uri(root), {**summary.to_dict(), "job": job, "inputs": inputs})
