"""The bookkeeping of one build: every step's summary and every dropped row with its reason.

LLM stages run through ``run`` (the one stage call of every builder step: the answer form fitted
to the stage's token budget, failed rows recorded, failed answers retried with ``retries=n``)
and report through the stage runner (rows in = parsed + failed); a builder's own steps (filters,
checks, samplers) report here the same way (``keep`` / ``drop``), so the printed table reconciles
line by line. Every dropped row of every builder lands in one ``rejected`` table with
one schema (``REJECTED_SCHEMA``), at ``benchmarks/<name>/rejected``:

- ``stage`` the step or LLM stage that dropped it, ``reason`` a countable code (LLM stages:
  ``parse_error``, ``engine_error`` or ``not_run``), ``detail`` the particulars;
- ``unit`` what was dropped (``article``, ``question``, ``event``, …), ``item_id`` its id,
  ``parent_id`` the unit it belongs to (a complex event, a TCE, a question);
- ``raw_text`` the model's answer at that stage, ``not_run`` true for plan-mode rows that have
  no answer yet, ``record`` the builder's own fields of the row as JSON, ``date`` the day the
  unit belongs to (Daily Oracle partitions by it).
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.llm import attempts
from pipelines.llm.stage import LLMStage, StageRunner
from udfs import storage
from udfs.layout import Layout
from udfs.report import RunSummary, combined_table

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
        pa.field("unit", pa.string(), nullable=False),
        pa.field("item_id", pa.string()),
        pa.field("parent_id", pa.string()),
        pa.field("raw_text", pa.string()),
        pa.field("not_run", pa.bool_(), nullable=False),
        pa.field("record", pa.string()),
        pa.field("date", pa.date32()),
    ]
)
DETAIL_CHARS = 500
RAW_CHARS = 4000
FLUSH_ROWS = 1_000  # rejected rows kept as Python dicts before they become one Arrow table
SPILL_ROWS = 10_000  # rejected rows kept as Arrow tables before they go to a local spill file
# rows of a row group of the written rejected table: the writer holds one group, so this bounds
# write_rejected's memory (measured: +22 MB of peak RSS with 64k rows, +7.5 MB with 10k)
ROW_GROUP_ROWS = 10_000


def failure_reason(row: dict[str, Any]) -> str:
    """Why an LLM stage row failed: ``not_run``, ``engine_error`` or ``parse_error``."""
    if row.get("not_run"):
        return "not_run"
    return "engine_error" if (row["parse_error"] or "").startswith("engine") else "parse_error"


class Ledger:
    """Summaries in run order and rejected rows of one build (``runner.namespace`` is its name)."""

    def __init__(self, runner: StageRunner):
        self.runner = runner
        self.name = runner.namespace
        self.summaries: list[RunSummary] = []
        self._counts: Counter[tuple[str, str]] = Counter()  # rejected rows by (stage, reason)
        self._pending: list[dict[str, Any]] = []  # the newest rejected rows
        self._parts: list[pa.Table] = []  # older ones, compact
        self._spilled: list[Path] = []  # the oldest, in local Parquet files
        self._spill_dir: tempfile.TemporaryDirectory | None = None

    def _reject(self, row: dict[str, Any]) -> None:
        """Record one rejected row. Rows become Arrow tables a thousand at a time and go to a
        local spill file ten thousand at a time: a step that rejects nearly every article of a
        corpus (TCE formation's noise) holds a bounded number of them in its driver."""
        self._counts[row["stage"], row["reason"]] += 1
        self._pending.append(row)
        if len(self._pending) >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        """The pending rows become one Arrow table."""
        if self._pending:
            self._add(pa.Table.from_pylist(self._pending, schema=REJECTED_SCHEMA))
            self._pending = []

    def _add(self, part: pa.Table) -> None:
        """Hold a part; once the parts held reach ``SPILL_ROWS`` rows, write them to a spill file."""
        self._parts.append(part)
        if sum(p.num_rows for p in self._parts) >= SPILL_ROWS:
            if self._spill_dir is None:
                self._spill_dir = tempfile.TemporaryDirectory(prefix=f"augury-{self.name}-rejected-")
            path = Path(self._spill_dir.name) / f"{len(self._spilled):06d}.parquet"
            pq.write_table(pa.concat_tables(self._parts), path)
            self._spilled.append(path)
            self._parts = []

    def _batches(self) -> Iterator[pa.RecordBatch]:
        """Every rejected row so far as record batches, in the order recorded (a spill file's rows
        are read a thousand at a time)."""
        self._flush()  # first: it may spill
        for path in self._spilled:
            with pq.ParquetFile(path) as spilled:
                yield from spilled.iter_batches(batch_size=FLUSH_ROWS)
        for part in self._parts:
            yield from part.to_batches()

    # ---------------------------------------------------------------- builder steps
    def inputs(self, *specs, any_of: bool = False, optional: Sequence = ()) -> list:
        """Check the root and the corpus tables a build reads (all of ``specs``, or ``any_of``
        them) before any work (``udfs.cli.InputError`` names what is missing); ``optional``
        tables may be absent. An ``inputs`` step records each table's row count and notes an
        empty or absent one. Returns the specs present."""
        layout = Layout(self.runner.root)
        present = layout.require(*specs, any_of=any_of)
        present += [s for s in optional if storage.exists(layout.table(s))]
        step = self.step("inputs")
        for spec in (*specs, *optional):
            if spec not in present:
                step.notes.append(f"{spec.path} is absent")
                continue
            rows = storage.count_rows(layout.table(spec))
            step.metrics[f"{spec.name} rows"] = rows
            if rows == 0:
                step.notes.append(f"{spec.path} exists but is empty")
        step.finish()
        return present

    def step(self, name: str) -> RunSummary:
        """Start the summary of a builder step (not an LLM stage)."""
        summary = RunSummary(name=f"{self.name}/{name}")
        self.summaries.append(summary)
        return summary

    @staticmethod
    def keep(summary: RunSummary, n: int = 1) -> None:
        """Count ``n`` rows read and kept by a step."""
        summary.rows_read += n
        summary.rows_written += n

    def drop(
        self,
        summary: RunSummary | None,
        reason: str,
        *,
        unit: str,
        item_id: str | None,
        parent_id: str | None = None,
        detail: str | None = None,
        raw_text: str | None = None,
        record: dict[str, Any] | None = None,
        date: dt.date | None = None,
        stage: str | None = None,
    ) -> None:
        """Record a dropped row; with a summary, count it there as read and rejected."""
        if summary is not None:
            summary.rows_read += 1
            summary.reject(reason)
        self._reject(
            {
                "stage": stage or (summary.name.split("/", 1)[-1] if summary else "unknown"),
                "reason": reason,
                "detail": (detail or "")[:DETAIL_CHARS] or None,
                "unit": unit,
                "item_id": item_id,
                "parent_id": parent_id,
                "raw_text": (raw_text or "")[:RAW_CHARS] or None,
                "not_run": False,
                "record": json.dumps(record, default=str, sort_keys=True) if record else None,
                "date": date,
            }
        )

    def drop_ids(self, summary: RunSummary, reason: str, *, unit: str, ids: pa.Array) -> None:
        """Record many dropped rows that share a reason and carry only their ids, as one Arrow
        table: no Python object per row (TCE formation's noise is nearly every article)."""
        if not len(ids):
            return
        summary.rows_read += len(ids)
        summary.reject(reason, len(ids))
        n = len(ids)
        stage = summary.name.split("/", 1)[-1]
        self._counts[stage, reason] += n
        columns = {
            "stage": pa.repeat(stage, n),
            "reason": pa.repeat(reason, n),
            "unit": pa.repeat(unit, n),
            "item_id": ids.cast(pa.string()),
            "not_run": pa.repeat(False, n),
        }
        table = pa.table(
            [columns.get(f.name, pa.nulls(n, f.type)) for f in REJECTED_SCHEMA], schema=REJECTED_SCHEMA
        )
        self._flush()
        self._add(table)

    def close(self, summary: RunSummary) -> RunSummary:
        """Finish a step's summary; its counts must reconcile."""
        summary.finish()
        if not summary.reconciles:
            raise AssertionError(f"{summary.name}: counts do not reconcile\n{summary.table()}")
        return summary

    # ---------------------------------------------------------------- LLM stages
    def budget(self, prompt_id: str) -> int:
        """The tokens an answer of ``prompt_id`` may take in this run: its ``max_tokens`` under
        ``--max-new-tokens``."""
        return attempts.answer_budget(prompt_id, self.runner.llm.max_new_tokens)

    def run(
        self,
        stage: LLMStage,
        rows: pa.Table | list[dict[str, Any]],
        *,
        unit: str | None = None,
        id_column: str | None = None,
        parent_column: str | None = None,
        date_column: str | None = None,
        record_columns: Sequence[str] = (),
        retries: int = 0,
    ) -> pa.Table:
        """Run one LLM stage over ``rows`` (a table or row dicts, empty allowed), with its answer
        form fitted to its token budget (``attempts.BuilderStage``); every failed row
        (``parse_ok`` false) is recorded as rejected (``unit`` and ``id_column`` name what it
        rejects; without a ``unit`` the caller records failures itself, for a stage whose rows
        are not the units it rejects). Returns the whole output: one row per input row and
        sample, failed ones included.

        ``retries`` > 0: the failed rows are asked again up to that many times, each time as a
        stage of its own (``<stage>_retry<n>``, ``attempts.retry``) over the rows still failing,
        their failures recorded as that stage's. The output then holds every attempt's rows,
        first attempt first, each with the sample ``slot`` it fills."""
        stage = attempts.fit(stage, self.runner.llm.max_new_tokens)
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
        record = dict(
            unit=unit,
            id_column=id_column,
            parent_column=parent_column,
            date_column=date_column,
            record_columns=record_columns,
        )
        outputs = [self._run_once(stage, table, **record)]
        for attempt in range(1, retries + 1):
            failures = attempts.failed(outputs[-1])
            if failures.num_rows == 0:
                break
            again, again_rows = attempts.retry(stage, attempt, table, failures)
            outputs.append(self._run_once(again, again_rows, **record))
        return attempts.combined(outputs) if retries else outputs[0]

    def _run_once(
        self,
        stage: LLMStage,
        table: pa.Table,
        *,
        unit: str | None,
        id_column: str | None,
        parent_column: str | None,
        date_column: str | None,
        record_columns: Sequence[str],
    ) -> pa.Table:
        """One stage over ``table``, its failed rows recorded (``run``)."""
        out = self.runner.run(stage, table)
        self.summaries.append(self.runner.summaries[-1])
        if out.num_rows != table.num_rows * stage.samples:
            raise AssertionError(f"stage {stage.name}: {table.num_rows} rows in, {out.num_rows} out")
        failed = out.filter(pc.invert(out.column("parse_ok"))) if unit else out.slice(0, 0)
        for row in failed.to_pylist():
            self._reject(
                {
                    "stage": stage.name,
                    "reason": failure_reason(row),
                    "detail": (row["parse_error"] or "")[:DETAIL_CHARS] or None,
                    "unit": unit,
                    "item_id": _text(row.get(id_column)) if id_column else None,
                    "parent_id": _text(row.get(parent_column)) if parent_column else None,
                    "raw_text": (row["raw_text"] or "")[:RAW_CHARS] or None,
                    "not_run": bool(row["not_run"]),
                    "record": json.dumps({c: row.get(c) for c in record_columns}, default=str, sort_keys=True)
                    if record_columns
                    else None,
                    "date": row.get(date_column) if date_column else None,
                }
            )
        return out

    # ---------------------------------------------------------------- outputs
    def rejected_table(self) -> pa.Table:
        """Every rejected row so far, in the order recorded, as one table: for builders whose
        rejects their own work bounds (Daily Oracle writes them with its days' partitions).
        A builder whose rejects grow with the corpus writes them with ``write_rejected``."""
        return pa.Table.from_batches(list(self._batches()), REJECTED_SCHEMA)

    def rejected_counts(self) -> dict[str, dict[str, int]]:
        """Rejected rows per stage and reason, stages and reasons sorted."""
        out: dict[str, dict[str, int]] = {}
        for (stage, reason), n in sorted(self._counts.items()):
            out.setdefault(stage, {})[reason] = n
        return out

    def write_rejected(self) -> int:
        """Write ``benchmarks/<name>/rejected`` (replacing it) as one Parquet file streamed from the
        spill files and the rows held, never the whole table at once; returns its rows."""
        storage.delete(self.uri())
        fs, path = storage.filesystem(self.uri())
        fs.create_dir(path, recursive=True)
        rows, group = 0, []
        with pq.ParquetWriter(f"{path}/part-00000.parquet", REJECTED_SCHEMA, filesystem=fs) as writer:
            for batch in self._batches():  # a row group of ROW_GROUP_ROWS, not one per batch
                group.append(batch)
                rows += batch.num_rows
                if sum(b.num_rows for b in group) >= ROW_GROUP_ROWS:
                    writer.write_table(pa.Table.from_batches(group, REJECTED_SCHEMA))
                    group = []
            if group:
                writer.write_table(pa.Table.from_batches(group, REJECTED_SCHEMA))
        return rows

    def uri(self) -> str:
        return Layout(self.runner.root).benchmark(self.name, "rejected")

    def check(self) -> None:
        """Every summary must reconcile (rows in = rows out + rows rejected); the builder driver
        checks before it writes anything."""
        unreconciled = [s.name for s in self.summaries if not s.reconciles]
        if unreconciled:
            raise AssertionError(f"counts do not reconcile in {unreconciled}")

    def table(self) -> str:
        """The run's summary table, one line per step and stage."""
        llm = self.runner.llm
        return combined_table(self.summaries, f"{self.name} on {llm.backend}:{llm.model}")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def read_rejected(root: str, name: str) -> pa.Table:
    """A builder's ``rejected`` table (any partitioning) in the one schema."""
    return storage.read_table(Layout(root).benchmark(name, "rejected"), REJECTED_SCHEMA)
