"""PROPHET's LLM calls: every stage through the ledger, its failed rows retried, and the LLM
cost of every question.

A failed row (a parse or engine error) is retried up to ``retries`` times with a new seed and
sampling (a greedy retry would repeat its answer), each retry a stage of its own
(``<stage>_retry<n>``) over every row still failing. A retried row keeps the sample slot it
fills in ``slot``. Every failed row of every attempt is a rejected row of its stage
(``parse_error`` / ``engine_error``); in plan mode a row with no answer yet is ``not_run`` and
is not retried, while a row whose cached answer failed is retried as in a run, so the cached
retry answers are read and counted.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import LLMStage
from udfs.ids import stable_seed

RETRY_TEMPERATURE = 0.7  # retries of greedy prompts sample, or they would repeat the same answer


class Costs:
    """LLM requests and tokens per question and stage group: the unique request keys of every
    stage output. The groups are the first attempts (queries, relevance, joint, conditional) and
    ``retries`` (every retry stage)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], dict[str, tuple[int, int]]] = defaultdict(dict)

    def add(self, out: pa.Table, stage_name: str) -> None:
        if "_retry" in stage_name:
            group = "retries"
        else:
            group = "queries" if stage_name.startswith("query_") else stage_name
        cols = out.select(["question_id", "request_key", "input_tokens", "output_tokens"]).to_pylist()
        for row in cols:
            if row["request_key"]:
                self.keys[(row["question_id"], group)][row["request_key"]] = (
                    row["input_tokens"] or 0,
                    row["output_tokens"] or 0,
                )

    def requests(self, question_id: str, group: str) -> int:
        return len(self.keys.get((question_id, group), {}))

    def of(self, question_id: str) -> tuple[int, int, int]:
        """(requests, input tokens, output tokens) of one question over all its stages."""
        keys = {k: v for (qid, _), found in self.keys.items() if qid == question_id for k, v in found.items()}
        return len(keys), sum(v[0] for v in keys.values()), sum(v[1] for v in keys.values())


@dataclass(frozen=True)
class Unit:
    """How a stage's rows are recorded when they fail: what they are and which columns identify
    them (``pipelines.llm.ledger.Ledger.run``). Every PROPHET row belongs to a question."""

    name: str
    id_column: str
    record_columns: Sequence[str] = ()


class Attempts:
    """Runs the builder's LLM stages with retries; keeps the ledger and the per-question costs."""

    def __init__(self, ledger: Ledger, seed: int):
        self.ledger, self.seed = ledger, seed
        self.costs = Costs()

    def run(self, stage: LLMStage, rows: pa.Table, unit: Unit, retries: int = 0) -> list[pa.Table]:
        """Run a stage, then retry its failed rows up to ``retries`` times (see the module
        docstring). Returns the first output and every retry's output."""
        outputs = [self._run(stage, rows, unit)]
        temperature = stage.sampling.get("temperature", stage.prompt.sampling.get("temperature", 0.0))
        for attempt in range(1, retries + 1):
            last = outputs[-1]
            failed = last.filter(pc.invert(pc.or_(last.column("parse_ok"), last.column("not_run"))))
            if failed.num_rows == 0:
                break
            slots = failed.column("slot" if "slot" in failed.column_names else "sample_index").to_pylist()
            again = failed.select([c for c in rows.column_names if c != "slot"])
            again = again.append_column("slot", pa.array(slots, pa.int32()))
            again = again.append_column(
                "retry_sampling",
                pa.array(
                    [
                        json.dumps({"seed": stable_seed(self.seed, stage.name, attempt, slot)})
                        for slot in slots
                    ]
                ),
            )
            retry = dataclasses.replace(
                stage,
                name=f"{stage.name}_retry{attempt}",
                samples=1,
                sampling={**stage.sampling, "temperature": temperature or RETRY_TEMPERATURE},
                sampling_column="retry_sampling",
            )
            outputs.append(self._run(retry, again, unit))
        return outputs

    def _run(self, stage: LLMStage, rows: pa.Table, unit: Unit) -> pa.Table:
        out = self.ledger.run(
            stage,
            rows,
            unit=unit.name,
            id_column=unit.id_column,
            parent_column="question_id" if unit.id_column != "question_id" else None,
            record_columns=unit.record_columns,
        )
        self.costs.add(out, stage.name)
        return out


def not_answered(outputs: list[pa.Table]) -> set[str]:
    """Questions with a row (first attempt or retry) the engine has not answered yet (plan mode)."""
    return {
        row["question_id"]
        for out in outputs
        for row in out.filter(out.column("not_run")).select(["question_id"]).to_pylist()
    }
