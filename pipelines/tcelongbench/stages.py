"""The builder's LLM stages: prompt, parser and parsed columns per stage name.

Every prompt opens the assistant turn with an answer prefix (``Question:``, ``Q1:``, ``(b)``,
``* `` …) that its parser reads (``parse_prefix``), except the two summaries. Generation length
is the prompt's own ``max_tokens``, capped by ``--max-new-tokens`` in the stage runner; the two
voting checks are ``verify_rounds`` samples of one request with distinct seeds.

Every stage declares its answer form (``udfs.tcelongbench.outputs``) for its token budget: the
prompt file declares it for the prompt's own ``max_tokens``, the stage narrows it to the cap of
the run (``BuilderStage.form``, asked by the ledger), so a constrained answer always ends inside
its budget. Forecast questions carry a form
per row (``FORECAST_FORM``), with the row's own day.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipelines.llm.attempts import BuilderStage
from pipelines.llm.stage import LLMStage, Parser
from pipelines.tcelongbench.config import Config
from udfs.tcelongbench import order, outline, outputs, qa, verify
from udfs.tcelongbench.tables import NAME


def _columns(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields])


SUMMARY = _columns(("summary", pa.string()))
POINTS = _columns(("points", pa.list_(pa.string())))
QA_FIELDS = _columns(("question", pa.string()), ("answer", pa.string()))
EVIDENCE = _columns(("evidence_pass", pa.bool_()), ("evidence_sentence", pa.string()))
DISTRACTORS = _columns(*((f"distractor_{x}", pa.string()) for x in "bcd"))
VOTES = _columns(("q1", pa.string()), ("q2", pa.string()))
ENTITIES = _columns(("entities", pa.list_(pa.string())))
FORECAST_FORM = "answer_form"  # the column of a forecast row's declared answer form


def llm_stages(config: Config) -> dict[str, LLMStage]:
    """Every LLM stage of a run by name; each declares its answer form for its token budget."""

    def stage(name: str, parser: Parser, schema: pa.Schema, prompt: str | None = None, **kw: Any) -> LLMStage:
        kw.setdefault("parse_prefix", True)
        regex = outputs.FORMS[prompt or name]
        return BuilderStage(
            name,
            f"{NAME}.{prompt or name}",
            parser=parser,
            parsed_schema=schema,
            seed=config.seed,
            form=lambda budget: {"regex": regex(budget)},
            **kw,
        )

    rounds = config.verify_rounds
    return {
        "article_summary": stage("article_summary", outline.parse_summary, SUMMARY, parse_prefix=False),
        "day_summary": stage("day_summary", outline.parse_summary, SUMMARY, parse_prefix=False),
        "key_points": stage("key_points", outline.parse_key_points, POINTS),
        "detail_qa": stage("detail_qa", qa.parse_qa, QA_FIELDS),
        "forecast_qa": stage("forecast_qa", qa.parse_qa, QA_FIELDS, structured_column=FORECAST_FORM),
        "evidence": stage("evidence", qa.parse_evidence, EVIDENCE),
        "distractors": stage("distractors", qa.parse_distractors, DISTRACTORS),
        "forecast_votes": stage(
            "forecast_votes", verify.parse_votes, VOTES, "forecast_check", samples=rounds
        ),
        "entities": stage("entities", order.parse_entities, ENTITIES),
        "order_votes": stage("order_votes", verify.parse_votes, VOTES, "order_check", samples=rounds),
    }
