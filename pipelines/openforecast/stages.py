"""The builder's LLM stages: prompt, parser, parsed columns and sampling, per stage name.

Requests ask for structured output where a backend enforces it (vLLM: a JSON schema for
structured events, a regex for dates); the parsers accept the same answers without it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pipelines.llm.stage import LLMStage
from udfs.llm_parsing import ParseError
from udfs.openforecast import questions, structured, timeline
from udfs.openforecast.dates import extract_date

DATE_REGEX = r"\s*(\d{4}(-\d{2}(-\d{2})?)?|Unknown)"
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


def _generate(name: str, prompt_id: str, parser: Any, schema: pa.Schema, **kwargs: Any) -> LLMStage:
    return LLMStage(name, prompt_id, parser=parser, parsed_schema=schema, **kwargs)


def heading_stage() -> LLMStage:
    return LLMStage("wiki_heading", "openforecast.page_heading")


def date_stage(name: str, prompt_id: str) -> LLMStage:
    parser = parse_required_date if prompt_id == "openforecast.page_date" else parse_optional_date
    return _generate(name, prompt_id, parser, TS_SCHEMA, structured={"regex": DATE_REGEX})


def timeline_stage(name: str, prompt_id: str, samples: int = 1) -> LLMStage:
    return _generate(name, prompt_id, timeline.parse_timeline, EVENTS_SCHEMA, samples=samples)


def structured_stage(name: str) -> LLMStage:
    return _generate(
        name,
        "openforecast.event_struct",
        structured.parse_structured,
        STRUCTURED_SCHEMA,
        structured={"json": structured.JSON_SCHEMA},
    )


def negatives_stage() -> LLMStage:
    return _generate(
        "mcnc_negatives", "openforecast.mcnc_negatives", questions.parse_negatives, NEGATIVES_SCHEMA
    )


def mcac_stage() -> LLMStage:
    return _generate("mcac_questions", "openforecast.mcac_question", questions.parse_mcac, MCAC_SCHEMA)
