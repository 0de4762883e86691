"""Bookkeeping of one build: every step's summary and every dropped row with its reason.

LLM stages report through the stage runner (rows in = parsed + failed); the builder's own steps
(filters, checks, samplers) report here the same way, so the printed table reconciles line by
line, and every rejected row lands in one ``rejected`` table with its stage and reason.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipelines.llm.stage import LLMStage, StageRunner
from udfs.report import RunSummary

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("ce_id", pa.string()),
        pa.field("item", pa.string()),  # what was dropped: a page title, story key, event, question id
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
    ]
)
DETAIL_CHARS = 500


class Ledger:
    """Summaries in run order and rejected rows of one build."""

    def __init__(self, runner: StageRunner):
        self.runner = runner
        self.summaries: list[RunSummary] = []
        self.rejected: list[dict[str, Any]] = []

    def step(self, name: str) -> RunSummary:
        """Start the summary of a builder step (not an LLM stage)."""
        summary = RunSummary(name=f"{self.runner.namespace}/{name}")
        self.summaries.append(summary)
        return summary

    @staticmethod
    def keep(summary: RunSummary, n: int = 1) -> None:
        summary.rows_read += n
        summary.rows_written += n

    def drop(
        self, summary: RunSummary, ce_id: str | None, item: str | None, reason: str, detail: str | None = None
    ) -> None:
        summary.rows_read += 1
        summary.reject(reason)
        self.rejected.append(
            {
                "stage": summary.name.split("/", 1)[-1],
                "ce_id": ce_id,
                "item": item,
                "reason": reason,
                "detail": (detail or "")[:DETAIL_CHARS] or None,
            }
        )

    def run(self, stage: LLMStage, rows: list[dict[str, Any]], item: str) -> list[dict[str, Any]]:
        """Run one LLM stage over ``rows``; failed rows (``parse_ok`` false) are recorded as
        rejected with their error, keyed by the ``item`` column. Returns every output row."""
        table = pa.Table.from_pylist(rows) if rows else pa.table({"ce_id": pa.array([], pa.string())})
        out = self.runner.run(stage, table).to_pylist()
        self.summaries.append(self.runner.summaries[-1])
        for r in out:
            if not r["parse_ok"]:
                self.rejected.append(
                    {
                        "stage": stage.name,
                        "ce_id": r.get("ce_id"),
                        "item": str(r.get(item)),
                        "reason": r["parse_error"] or "unknown",
                        "detail": (r["raw_text"] or "")[:DETAIL_CHARS] or None,
                    }
                )
        return out

    def rejected_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rejected, schema=REJECTED_SCHEMA)
