"""The LLM cost of every PROPHET question, and the questions a plan cannot know yet."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa


class Costs:
    """LLM requests and tokens per question and stage group: the unique request keys of every
    stage output. The groups are the first attempts (queries, relevance, joint, conditional) and
    ``retries`` (every retry stage, ``<stage>_retry<n>``)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], dict[str, tuple[int, int]]] = defaultdict(dict)

    def add(self, out: pa.Table) -> None:
        """The requests of a stage output (every attempt's rows, ``Ledger.run``)."""
        columns = ["stage", "question_id", "request_key", "input_tokens", "output_tokens"]
        for row in out.select(columns).to_pylist():
            if row["request_key"]:
                self.keys[(row["question_id"], group(row["stage"]))][row["request_key"]] = (
                    row["input_tokens"] or 0,
                    row["output_tokens"] or 0,
                )

    def requests(self, question_id: str, group: str) -> int:
        return len(self.keys.get((question_id, group), {}))

    def of(self, question_id: str) -> tuple[int, int, int]:
        """(requests, input tokens, output tokens) of one question over all its stages."""
        keys = {k: v for (qid, _), found in self.keys.items() if qid == question_id for k, v in found.items()}
        return len(keys), sum(v[0] for v in keys.values()), sum(v[1] for v in keys.values())


def group(stage: str) -> str:
    """The cost group of a stage: ``retries``, ``queries`` (the three query prompts) or the stage."""
    if "_retry" in stage:
        return "retries"
    return "queries" if stage.startswith("query_") else stage


def not_answered(out: pa.Table) -> set[str]:
    """Questions with a row (first attempt or retry) the engine has not answered yet (plan mode)."""
    return {
        row["question_id"] for row in out.filter(out.column("not_run")).select(["question_id"]).to_pylist()
    }
