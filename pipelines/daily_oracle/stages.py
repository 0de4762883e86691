"""The five LLM stages of Daily Oracle and the one way the steps run them.

Every generate stage's parser reads the whole assistant turn (the prompt's answer prefix, e.g.
``Question 1:``, plus the generated text; ``parse_prefix``). Generation length comes from the
prompts, capped by ``--max-new-tokens`` (``LLMConfig.max_new_tokens``).

A stage row is not always one unit: the distractors and filter rows carry an article's questions,
and a failed category row drops nothing (the question falls back to ``Other``). So the steps read
the output rows themselves and record each unit's rejection with a reason of its own
(``<stage>_parse_error``, ``<stage>_engine_error``, ``<stage>_not_run``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pipelines.llm.ledger import Ledger, failure_reason
from pipelines.llm.stage import LLMStage
from udfs.daily_oracle.parsing import parse_distractors, parse_filter, parse_qa, parse_summary
from udfs.daily_oracle.units import NAME, Rejection

SUMMARY_SCHEMA = pa.schema([pa.field("summary", pa.string()), pa.field("keypoint", pa.string())])
QA_SCHEMA = pa.schema(
    [pa.field("questions", pa.list_(pa.string())), pa.field("answers", pa.list_(pa.string()))]
)
DISTRACTORS_SCHEMA = pa.schema([pa.field("distractors", pa.list_(pa.string()))])
FILTER_SCHEMA = pa.schema(
    [
        pa.field("filter_scores", pa.list_(pa.list_(pa.int64()))),
        pa.field("filter_errors", pa.list_(pa.string())),
        pa.field("filter_blocks", pa.list_(pa.string())),
    ]
)


def _generate(name: str, parser: Callable[[str], dict[str, Any]], schema: pa.Schema) -> LLMStage:
    return LLMStage(name, f"{NAME}.{name}", parser=parser, parsed_schema=schema, parse_prefix=True)


STAGES = {
    "summary": _generate("summary", parse_summary, SUMMARY_SCHEMA),
    "qa": _generate("qa", parse_qa, QA_SCHEMA),
    "distractors": _generate("distractors", parse_distractors, DISTRACTORS_SCHEMA),
    "filter": _generate("filter", parse_filter, FILTER_SCHEMA),
    "category": LLMStage("category", f"{NAME}.category"),
}


def run_stage(
    ledger: Ledger, name: str, units: Sequence[Any], variables: Callable[[Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One batched pass of stage ``name`` over ``units`` (the prompt variables of each); returns
    the output rows in unit order. The steps record failures: a failed distractor or filter row
    rejects several questions, a failed category row none (the question falls back to Other)."""
    return ledger.run(STAGES[name], [variables(u) for u in units]).to_pylist()


def failure(stage: str, row: dict[str, Any]) -> Rejection:
    """The rejection of a unit whose stage row failed (parse error, engine error or not run)."""
    return Rejection(
        stage, f"{stage}_{failure_reason(row)}", row["parse_error"] or "unknown", row["raw_text"]
    )
