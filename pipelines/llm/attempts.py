"""What ``Ledger.run`` adds to a stage before and after it runs: the answer form fitted to the
stage's token budget, and the retries of failed answers.

A builder stage (``BuilderStage``) may declare ``form(budget) -> form``: its answer form for
the tokens its answer may take, the prompt's ``max_tokens`` under ``--max-new-tokens``
(``answer_budget``); the ledger asks for it when the stage runs, so no stage is built around the
cap. A prompt file declares its form for its own ``max_tokens``; ``below_cap`` keeps that form
unless the budget is smaller.

A retry (``retry_stage``) re-asks every row of a stage whose answer failed (a parse or an engine
error) as a stage of its own, ``<stage>_retry<n>``, with a new seed per row and sampling (a
greedy retry would repeat its answer); each row keeps the sample slot it fills in ``slot``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.stage import LLMStage
from udfs.ids import stable_seed
from udfs.prompts import load_prompt

Form = Callable[[int], dict[str, Any] | None]
RETRY_TEMPERATURE = 0.7  # retries of greedy prompts sample, or they would repeat the same answer
SLOT = "slot"  # the sample slot a row fills (its ``sample_index``, or the failed row's it retries)
RETRY_SAMPLING = "retry_sampling"


@dataclass(frozen=True)
class BuilderStage(LLMStage):
    """An LLM stage whose answer form follows its token budget: ``form(budget)`` (None: the
    prompt's own declaration), asked by ``Ledger.run`` when the stage runs."""

    form: Form | None = None


def answer_budget(prompt_id: str, cap: int | None) -> int:
    """The tokens an answer may take: the prompt's ``max_tokens``, capped by ``--max-new-tokens``."""
    limit = load_prompt(prompt_id).sampling["max_tokens"]
    return min(limit, cap) if cap else limit


def below_cap(prompt_id: str, fitted: Callable[[str, int], dict[str, Any] | None]) -> Form:
    """The form of a prompt whose file declares it for its own ``max_tokens``: that one (None)
    unless the budget is smaller, then ``fitted(prompt_id, budget)``."""
    limit = load_prompt(prompt_id).sampling["max_tokens"]

    def form(budget: int) -> dict[str, Any] | None:
        return None if budget >= limit else fitted(prompt_id, budget)

    return form


def fit(stage: LLMStage, cap: int | None) -> LLMStage:
    """The stage with its answer form for its budget under ``cap`` (a plain stage as it is)."""
    if not isinstance(stage, BuilderStage) or stage.form is None:
        return stage
    return dataclasses.replace(stage, structured=stage.form(answer_budget(stage.prompt_id, cap)), form=None)


def failed(out: pa.Table) -> pa.Table:
    """The rows to retry: answered, and failed (a plan's rows without an answer are not)."""
    return out.filter(pc.invert(pc.or_(out.column("parse_ok"), out.column("not_run"))))


def retry(stage: LLMStage, attempt: int, rows: pa.Table, failures: pa.Table) -> tuple[LLMStage, pa.Table]:
    """Retry ``attempt`` of a stage over its ``failures`` (rows of its last attempt): the retry
    stage and its input rows (the input columns of ``rows``, the slot and a seed per row)."""
    slots = failures.column(SLOT if SLOT in failures.column_names else "sample_index").to_pylist()
    again = failures.select([c for c in rows.column_names if c != SLOT])
    again = again.append_column(SLOT, pa.array(slots, pa.int32()))
    seeds = [json.dumps({"seed": stable_seed(stage.seed, stage.name, attempt, slot)}) for slot in slots]
    again = again.append_column(RETRY_SAMPLING, pa.array(seeds))
    temperature = stage.sampling.get("temperature", stage.prompt.sampling.get("temperature", 0.0))
    retried = dataclasses.replace(
        stage,
        name=f"{stage.name}_retry{attempt}",
        samples=1,
        sampling={**stage.sampling, "temperature": temperature or RETRY_TEMPERATURE},
        sampling_column=RETRY_SAMPLING,
    )
    return retried, again


def combined(outputs: list[pa.Table]) -> pa.Table:
    """A stage's first output and its retries' as one table, first attempt first; every row
    with the slot it fills."""
    first = outputs[0]
    columns = [*first.column_names, SLOT]
    first = first.append_column(SLOT, first.column("sample_index").cast(pa.int32()))
    return pa.concat_tables([first, *(out.select(columns) for out in outputs[1:])])
