"""The builder's LLM stages: prompt, parser, parsed columns and sampling, per stage name.

Every generate prompt declares its answer form (``output:`` in its file), which every backend
enforces and the runner checks before the parser runs; the parsers accept every answer of that
form, and still read answers from backends that enforce nothing. Two departures from the
prompt's own declaration (``udfs.openforecast.outputs``): under a token cap
(``--max-new-tokens``) below a prompt's ``max_tokens`` a stage sends the form with fewer items
and shorter strings, so that answers can finish; the adjustment's form is per row (its lines are
the timeline's own items, ``REORDER_COLUMN``).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from pipelines.llm.stage import LLMStage
from udfs.llm_parsing import ParseError
from udfs.openforecast import outputs, questions, structured, timeline
from udfs.openforecast.dates import extract_date
from udfs.prompts import load_prompt

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


def declared(prompt_id: str, cap: int | None) -> dict[str, Any] | None:
    """The answer form a stage sends: None (the prompt's own declaration) unless ``cap`` is below
    the prompt's ``max_tokens``; then the form fitted to the cap."""
    if cap is None or cap >= load_prompt(prompt_id).sampling["max_tokens"]:
        return None
    return outputs.fitted(prompt_id, cap)


def _generate(
    name: str, prompt_id: str, parser: Any, schema: pa.Schema, cap: int | None = None, **kwargs: Any
) -> LLMStage:
    return LLMStage(
        name, prompt_id, parser=parser, parsed_schema=schema, structured=declared(prompt_id, cap), **kwargs
    )


def heading_stage() -> LLMStage:
    return LLMStage("wiki_heading", "openforecast.page_heading")


def date_stage(name: str, prompt_id: str) -> LLMStage:
    parser = parse_required_date if prompt_id == "openforecast.page_date" else parse_optional_date
    return _generate(name, prompt_id, parser, TS_SCHEMA)


def timeline_stage(name: str, prompt_id: str, cap: int | None, samples: int = 1) -> LLMStage:
    return _generate(name, prompt_id, timeline.parse_timeline, EVENTS_SCHEMA, cap, samples=samples)


def adjust_stage() -> LLMStage:
    """The chronology adjustment; each row carries its own answer form (``reorder_row``)."""
    return _generate(
        "adjust",
        "openforecast.adjust",
        timeline.parse_timeline,
        EVENTS_SCHEMA,
        structured_column=REORDER_COLUMN,
    )


def reorder_row(events: list[str]) -> str:
    """The ``REORDER_COLUMN`` value of a timeline: its lines are its own items."""
    return json.dumps(outputs.reorder_output(events))


def structured_stage(name: str, cap: int | None) -> LLMStage:
    return _generate(name, "openforecast.event_struct", structured.parse_structured, STRUCTURED_SCHEMA, cap)


def negatives_stage(cap: int | None) -> LLMStage:
    return _generate(
        "mcnc_negatives", "openforecast.mcnc_negatives", questions.parse_negatives, NEGATIVES_SCHEMA, cap
    )


def mcac_stage(cap: int | None) -> LLMStage:
    return _generate("mcac_questions", "openforecast.mcac_question", questions.parse_mcac, MCAC_SCHEMA, cap)
