"""The five LLM stages of Daily Oracle and the one way the steps run them.

Every generate stage's parser reads the whole assistant turn (the prompt's answer prefix, e.g.
``Question 1:``, plus the generated text; ``parse_prefix``). Generation length comes from the
prompts, capped by ``--max-new-tokens`` (``LLMConfig.max_new_tokens``). Each generate prompt
declares its answer form (``output:``), which backends enforce and the runner checks before the
parser runs; under a cap below a prompt's ``max_tokens`` the ledger sends the form fitted to the
cap (``udfs.daily_oracle.outputs.fitted``: shorter strings, no filter reasoning), so answers can
finish, and the qa stage sends each article a form whose time elements name the article's own
month (``QA_FORM``).

A stage row is not always one unit: the distractors and filter rows carry an article's questions,
and a failed category row drops nothing (the question falls back to ``Other``). So the steps read
the output rows themselves and record each unit's rejection with a reason of its own
(``<stage>_parse_error``, ``<stage>_engine_error``, ``<stage>_not_run``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pipelines.llm.attempts import BuilderStage, below_cap
from pipelines.llm.ledger import Ledger, failure_reason
from pipelines.llm.stage import LLMStage
from udfs.daily_oracle import outputs
from udfs.daily_oracle.parsing import parse_distractors, parse_filter, parse_qa, parse_summary
from udfs.daily_oracle.units import NAME, Rejection
from udfs.prompts import load_prompt

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


PARSERS: dict[str, tuple[Callable[[str], dict[str, Any]], pa.Schema]] = {
    "summary": (parse_summary, SUMMARY_SCHEMA),
    "qa": (parse_qa, QA_SCHEMA),
    "distractors": (parse_distractors, DISTRACTORS_SCHEMA),
    "filter": (parse_filter, FILTER_SCHEMA),
}


QA_FORM = "qa_form"  # the qa stage's per-article answer form (its own month and year), JSON


def qa_form(month_year: str, budget: int) -> str:
    """The ``QA_FORM`` value of an article of ``month_year`` for an answer ``budget`` (below the
    prompt's ``max_tokens``: the form fitted to it)."""
    limit = load_prompt(f"{NAME}.qa").sampling["max_tokens"]
    return json.dumps(outputs.qa_form(month_year, budget if budget < limit else None))


def stage(name: str) -> LLMStage:
    """Stage ``name``; its answer form fits its budget (``below_cap``). The qa stage reads each
    article's form from its ``QA_FORM`` column (null: the stage's form)."""
    prompt_id = f"{NAME}.{name}"
    if name not in PARSERS:
        return LLMStage(name, prompt_id)
    parser, schema = PARSERS[name]
    return BuilderStage(
        name,
        prompt_id,
        parser=parser,
        parsed_schema=schema,
        parse_prefix=True,
        structured_column=QA_FORM if name == "qa" else None,
        form=below_cap(prompt_id, outputs.fitted),
    )


STAGES = {name: stage(name) for name in (*PARSERS, "category")}


def run_stage(
    ledger: Ledger, name: str, units: Sequence[Any], variables: Callable[[Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One batched pass of stage ``name`` over ``units`` (the prompt variables of each); returns
    the output rows in unit order. The steps record failures: a failed distractor or filter row
    rejects several questions, a failed category row none (the question falls back to Other)."""
    return ledger.run(stage(name), [variables(u) for u in units]).to_pylist()


def failure(stage: str, row: dict[str, Any]) -> Rejection:
    """The rejection of a unit whose stage row failed (parse error, engine error or not run)."""
    return Rejection(
        stage, f"{stage}_{failure_reason(row)}", row["parse_error"] or "unknown", row["raw_text"]
    )
