"""The builder's LLM stages: prompt, parser, parsed columns and sampling, per stage name.

Every generate prompt declares its answer form (``output:`` in its file), which every backend
enforces and the runner checks before the parser runs; the parsers accept every answer of that
form, and still read answers from backends that enforce nothing. Two departures from the
prompt's own declaration (``udfs.openforecast.outputs``): under a token cap
(``--max-new-tokens``) below a prompt's ``max_tokens`` a stage sends the form with fewer items
and shorter strings, so that answers can finish (``BuilderStage.form``, fitted by the ledger); the adjustment's form is per row (its lines are
the timeline's own items, ``REORDER_COLUMN``).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from pipelines.llm.attempts import BuilderStage, below_cap
from pipelines.llm.stage import LLMStage
from udfs.llm_parsing import ParseError
from udfs.openforecast import outputs, questions, structured, timeline
from udfs.openforecast.dates import extract_date

REORDER_COLUMN = "reorder_output"  # the adjustment's per-row answer form (JSON)
EVENTS_SCHEMA = pa.schema([pa.field("events", pa.list_(pa.string()))])
TS_SCHEMA = pa.schema([pa.field("ts", pa.string())])
STRUCTURED_SCHEMA = pa.schema([pa.field("structured_json", pa.string())])
NEGATIVES_SCHEMA = pa.schema([pa.field("negatives", pa.list_(pa.string()))])
MCAC_SCHEMA = pa.schema(
    [
        pa.field("question", pa.string()),
        pa.field("true_answer", pa.string()),
        pa.field("wrong_answers", pa.list_(pa.string())),
    ]
)


def parse_required_date(text: str) -> dict[str, str]:
    """A CE date is required: no date in the answer is a parse error."""
    found = extract_date(text)
    if found is None:
        raise ParseError("no yyyy[-MM[-dd]] date in the answer")
    return {"ts": found}


def parse_optional_date(text: str) -> dict[str, str | None]:
    """An atomic event's timestamp is optional: Unknown or no date gives null."""
    return {"ts": extract_date(text)}


def _generate(
    name: str, prompt_id: str, parser: Any, schema: pa.Schema, fitted: bool = True, **kwargs: Any
) -> LLMStage:
    """A generate stage; ``fitted``: its answer form fits its token budget (``below_cap``)."""
    form = below_cap(prompt_id, outputs.fitted) if fitted else None
    return BuilderStage(name, prompt_id, parser=parser, parsed_schema=schema, form=form, **kwargs)


def heading_stage() -> LLMStage:
    return LLMStage("wiki_heading", "openforecast.page_heading")


def date_stage(name: str, prompt_id: str) -> LLMStage:
    """A date answer: a fixed-size form, the prompt's own."""
    parser = parse_required_date if prompt_id == "openforecast.page_date" else parse_optional_date
    return _generate(name, prompt_id, parser, TS_SCHEMA, fitted=False)


def timeline_stage(name: str, prompt_id: str, samples: int = 1) -> LLMStage:
    return _generate(name, prompt_id, timeline.parse_timeline, EVENTS_SCHEMA, samples=samples)


def adjust_stage() -> LLMStage:
    """The chronology adjustment; each row carries its own answer form (``reorder_row``)."""
    return _generate(
        "adjust",
        "openforecast.adjust",
        timeline.parse_timeline,
        EVENTS_SCHEMA,
        fitted=False,
        structured_column=REORDER_COLUMN,
    )


def reorder_row(events: list[str]) -> str:
    """The ``REORDER_COLUMN`` value of a timeline: its lines are its own items."""
    return json.dumps(outputs.reorder_output(events))


def structured_stage(name: str) -> LLMStage:
    return _generate(name, "openforecast.event_struct", structured.parse_structured, STRUCTURED_SCHEMA)


def negatives_stage() -> LLMStage:
    return _generate(
        "mcnc_negatives", "openforecast.mcnc_negatives", questions.parse_negatives, NEGATIVES_SCHEMA
    )


def mcac_stage() -> LLMStage:
    return _generate("mcac_questions", "openforecast.mcac_question", questions.parse_mcac, MCAC_SCHEMA)
