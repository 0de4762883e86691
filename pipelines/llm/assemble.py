"""Joining a stage's responses back to its input rows: the contract columns of ``udfs.llm_rows``.

One output row per (input row, sample). A choice row gets its option probabilities, a
verbalized row its parsed probability, a generate row the stage parser's columns; a parse
failure or an engine error is a row with ``parse_ok = false`` and a reason, and a row whose
requests have no answer yet (``--plan``) has ``not_run = true``.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.render import ROW, SAMPLE, UNIT_COLUMNS, plan_from_json
from udfs.choice import ChoicePlan, resolve_choice
from udfs.llm_parsing import ParseError, check_output, parse_verbalized_probability
from udfs.llm_rows import OUTPUT_COLUMNS, OUTPUT_FIELDS
from udfs.prompts import Prompt
from udfs.report import RunSummary

NOT_RUN = "not run (--plan)"


@dataclass
class Unit:
    """One output row: an input row and a sample index, with its requests."""

    row_index: int
    sample_index: int
    sampling: dict[str, Any]
    keys: list[str]
    options: list[str] | None = None
    plan: ChoicePlan | None = None
    structured: dict[str, Any] | None = None  # the declared answer form its requests were sent with


def answer_turn(parser: Callable[[str], dict[str, Any]], prefix: str) -> Callable[[str], dict[str, Any]]:
    """A parser of the whole assistant turn: the prompt's answer prefix plus the generated text.
    When the model repeats the prefix itself (leading whitespace and ``*`` aside), the
    generated text is parsed alone, so the prefix is not read twice."""
    bare_prefix = _bare(prefix)

    def parse(text: str) -> dict[str, Any]:
        repeated = bool(bare_prefix) and _bare(text).startswith(bare_prefix)
        return parser(text if repeated else prefix + text)

    return parse


def _bare(text: str) -> str:
    return text.lstrip(string.whitespace + "*").casefold()


def assemble_units(
    stage: Any,
    prompt: Prompt,
    identity: dict[str, Any],
    block: pa.Table,
    responses: dict[str, dict[str, Any]],
) -> pa.Table:
    """The output rows of a block of unit rows (``pipelines.llm.render``) given the answers of
    their requests: the block's input columns plus the contract and parsed columns, and the
    units' positions (``__row``, ``__sample``: Ray Data does not keep the order of blocks)."""
    units = [
        Unit(
            i,
            u["__sample"],
            json.loads(u["__sampling"]),
            list(u["__keys"]),
            options=u["__options"],
            plan=plan_from_json(u["__plan"]) if u["__plan"] else None,
            structured=json.loads(u["__structured"]) if u["__structured"] else None,
        )
        for i, u in enumerate(block.select(UNIT_COLUMNS[1:-1]).to_pylist())
    ]
    out = assemble(stage, prompt, identity, block.drop_columns(UNIT_COLUMNS), units, responses)
    return out.append_column(ROW, block.column(ROW)).append_column(SAMPLE, block.column(SAMPLE))


def assemble(
    stage: Any,
    prompt: Prompt,
    identity: dict[str, Any],
    rows: pa.Table,
    units: list[Unit],
    responses: dict[str, dict[str, Any]],
) -> pa.Table:
    """The output table of ``units`` over input ``rows`` (see the module docstring)."""
    kind = prompt.kind
    parser = stage.parser
    if parser is not None and stage.parse_prefix:
        parser = answer_turn(parser, prompt.answer_prefix)
    contract: dict[str, list[Any]] = {name: [] for name in OUTPUT_COLUMNS}
    parsed: dict[str, list[Any]] = {f.name: [] for f in stage.parsed_schema}
    for unit in units:
        values: dict[str, Any] = dict.fromkeys(OUTPUT_COLUMNS)
        fields: dict[str, Any] = {}
        answers = [responses.get(k) for k in unit.keys]
        values.update(
            identity,
            request_kind=kind,
            sample_index=unit.sample_index,
            temperature=unit.sampling["temperature"],
            top_p=unit.sampling["top_p"],
            max_tokens=unit.sampling["max_tokens"],
            seed=unit.sampling["seed"],
            sampling_params=json.dumps(unit.sampling, sort_keys=True),
            request_key=unit.keys[0] if unit.keys else None,
            input_tokens=sum(a["input_tokens"] or 0 for a in answers if a),
            output_tokens=sum(a["output_tokens"] or 0 for a in answers if a),
            latency_s=sum(a["latency_s"] or 0.0 for a in answers if a),
            not_run=False,
        )
        error = next((f"engine: {a['engine_error']}" for a in answers if a and a["engine_error"]), None)
        if any(a is None for a in answers):
            values.update(parse_ok=False, parse_error=NOT_RUN, not_run=True)
        elif error:
            values.update(parse_ok=False, parse_error=error)
        elif kind == "choice":
            probs, mass = resolve_choice(unit.plan, [a["score_logprobs"] for a in answers])
            best = max(range(len(probs)), key=lambda j: (probs[j], -j))
            values.update(
                options=unit.options,
                option_probs=probs,
                option_mass=mass,
                raw_text=unit.options[best],
                parse_ok=True,
            )
        else:
            text = answers[0]["generated_text"] or ""
            values["raw_text"] = text
            try:
                if unit.structured:
                    check_output(unit.structured, text)
                if kind == "verbalized":
                    values["prob"] = parse_verbalized_probability(text)["prob"]
                elif parser is not None:
                    fields = parser(text)
                values["parse_ok"] = True
            except ParseError as exc:
                values.update(parse_ok=False, parse_error=f"parse: {exc}")
        for name in OUTPUT_COLUMNS:
            contract[name].append(values[name])
        for name in parsed:
            parsed[name].append(fields.get(name))
    base = rows.take(pa.array([u.row_index for u in units], pa.int64())) if units else rows.slice(0, 0)
    for f in OUTPUT_FIELDS:
        base = base.append_column(f, pa.array(contract[f.name], f.type))
    for f in stage.parsed_schema:
        base = base.append_column(f, pa.array(parsed[f.name], f.type))
    return base


def summarize(table: pa.Table, summary: RunSummary) -> None:
    """Fill a stage's counts from its output rows: read, kept, rejected by reason, tokens."""
    failed = table.filter(pc.invert(table.column("parse_ok")))
    summary.rows_read = table.num_rows
    summary.rows_written = table.num_rows - failed.num_rows
    not_run = pc.sum(failed.column("not_run")).as_py() or 0
    if not_run:
        summary.reject("not_run", not_run)
    errors = failed.filter(pc.invert(failed.column("not_run"))).column("parse_error")
    for entry in pc.value_counts(errors.fill_null("")).to_pylist():
        summary.reject(reason_code(entry["values"] or None), entry["counts"])
    summary.metrics.update(
        input_tokens=pc.sum(table.column("input_tokens")).as_py() or 0,
        output_tokens=pc.sum(table.column("output_tokens")).as_py() or 0,
    )


def reason_code(error: str | None) -> str:
    """A countable reason: the error text with numbers masked and details after the first colon
    of the message cut, e.g. ``parse: expected N items, got N``."""
    text = re.sub(r"\d+", "N", error or "unknown")
    head, _, rest = text.partition(": ")
    return f"{head}: {rest.split(':', 1)[0][:80]}" if rest else head[:80]
