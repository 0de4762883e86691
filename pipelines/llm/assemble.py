"""Joining a stage's answers back to its units: the contract columns of ``udfs.llm_rows``.

One output row per unit (input row and sample). A choice row gets its option probabilities, a
verbalized row its parsed probability, a generate row the stage parser's columns; a parse
failure or an engine error is a row with ``parse_ok = false`` and a reason, and a row whose
requests have no answer yet (``--plan``) has ``not_run = true``. Columns that do not depend on
the answer's text are computed column-wise; only the checks and parsers run row by row.
"""

from __future__ import annotations

import functools
import json
import re
import string
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.render import ROW, SAMPLE, UNIT_COLUMNS, plan_from_json
from udfs.choice import resolve_choice
from udfs.llm_parsing import ParseError, check_output, parse_verbalized_probability
from udfs.llm_rows import OUTPUT_FIELDS, RESPONSE_SCHEMA
from udfs.prompts import Prompt
from udfs.report import RunSummary

NOT_RUN = "not run (--plan)"
_OUTCOME = (
    "raw_text",
    "options",
    "option_probs",
    "option_mass",
    "prob",
    "parse_ok",
    "parse_error",
    "not_run",
)


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
    stage: Any, prompt: Prompt, identity: dict[str, Any], units: pa.Table, answers: pa.Table
) -> pa.Table:
    """The output rows of unit rows (``pipelines.llm.render``) given ``answers`` (rows of
    ``RESPONSE_SCHEMA``, at most one per key; a key without one is not run): the units' input
    columns, the contract and parsed columns, and the units' positions (``__row``, ``__sample``)."""
    n = units.num_rows
    keys = units.column("__keys").combine_chunks()
    offsets = np.asarray(keys.offsets)
    parent = np.repeat(np.arange(n), np.diff(offsets))
    at = pc.index_in(pc.list_flatten(keys), value_set=answers.column("request_key"))
    found = answers.select(RESPONSE_SCHEMA.names).take(at)  # null rows where a key has no answer
    missing = np.bincount(parent, weights=~np.asarray(pc.is_valid(at), bool), minlength=n) > 0
    errors = _first_errors(found.column("engine_error"), parent)
    outcome = _Outcomes(stage, prompt, units, found, offsets)
    for j in range(n):
        if missing[j]:
            outcome.add(j, parse_ok=False, parse_error=NOT_RUN, not_run=True)
        elif j in errors:
            outcome.add(j, parse_ok=False, parse_error=f"engine: {errors[j]}")
        else:
            outcome.answered(j)
    sampling = units.column("__sampling").combine_chunks()
    first_key = pc.list_flatten(keys).take(pa.array(offsets[:-1], mask=np.diff(offsets) == 0))
    contract = {
        **{name: pa.repeat(pa.scalar(value), n) for name, value in identity.items()},
        "request_kind": pa.repeat(prompt.kind, n),
        "sample_index": units.column(SAMPLE),
        **{name: sampling.field(name) for name in ("temperature", "top_p", "max_tokens", "seed")},
        "sampling_params": sampling.field("params"),
        "request_key": first_key,
        **outcome.columns,
        **{
            name: _sums(found.column(name), parent, n)
            for name in ("input_tokens", "output_tokens", "latency_s")
        },
    }
    out = units.drop_columns(UNIT_COLUMNS)
    for f in OUTPUT_FIELDS:
        out = out.append_column(f, _as(contract[f.name], f.type))
    for f in stage.parsed_schema:
        out = out.append_column(f, pa.array([p.get(f.name) for p in outcome.parsed], f.type))
    return out.append_column(ROW, units.column(ROW)).append_column(SAMPLE, units.column(SAMPLE))


def empty_output(stage: Any, rows: pa.Table) -> pa.Table:
    """The output of a stage without input rows: no rows, every column."""
    out = rows.slice(0, 0)
    for f in [*OUTPUT_FIELDS, *stage.parsed_schema]:
        out = out.append_column(f, pa.array([], f.type))
    return out


class _Outcomes:
    """The answer-dependent columns of a block of units, filled unit by unit."""

    def __init__(self, stage: Any, prompt: Prompt, units: pa.Table, found: pa.Table, offsets: np.ndarray):
        self.kind, self.offsets = prompt.kind, offsets
        self.parser = stage.parser
        if self.parser is not None and stage.parse_prefix:
            self.parser = answer_turn(self.parser, prompt.answer_prefix)
        self.columns: dict[str, list[Any]] = {name: [] for name in _OUTCOME}
        self.parsed: list[dict[str, Any]] = []
        self.structured = units.column("__structured").to_pylist()
        if self.kind == "choice":
            self.plans = units.column("__plan").to_pylist()
            self.options = units.column("__options").to_pylist()
            self.logprobs = found.column("score_logprobs").to_pylist()
        else:
            self.texts = found.column("generated_text").to_pylist()

    def add(self, j: int, fields: dict[str, Any] | None = None, **values: Any) -> None:
        values.setdefault("not_run", False)
        for name, column in self.columns.items():
            column.append(values.get(name))
        self.parsed.append(fields or {})

    def answered(self, j: int) -> None:
        """Unit ``j`` has every answer and no engine error: resolve, check and parse them."""
        if self.kind == "choice":
            start, end = self.offsets[j], self.offsets[j + 1]
            options = self.options[j]
            probs, mass = resolve_choice(_plan(self.plans[j]), self.logprobs[start:end])
            best = max(range(len(probs)), key=lambda i: (probs[i], -i))
            self.add(
                j,
                options=options,
                option_probs=probs,
                option_mass=mass,
                raw_text=options[best],
                parse_ok=True,
            )
            return
        text = self.texts[self.offsets[j]] or ""
        fields: dict[str, Any] = {}
        try:
            if self.structured[j]:
                check_output(_declared(self.structured[j]), text)
            if self.kind == "verbalized":
                prob = parse_verbalized_probability(text)["prob"]
                self.add(j, raw_text=text, prob=prob, parse_ok=True)
                return
            if self.parser is not None:
                fields = self.parser(text)
        except ParseError as exc:
            self.add(j, raw_text=text, parse_ok=False, parse_error=f"parse: {exc}")
            return
        self.add(j, fields, raw_text=text, parse_ok=True)


@functools.lru_cache(maxsize=256)
def _plan(text: str) -> Any:
    return plan_from_json(text)


@functools.lru_cache(maxsize=256)
def _declared(text: str) -> dict[str, Any]:
    return json.loads(text)


def _first_errors(errors: pa.ChunkedArray, parent: np.ndarray) -> dict[int, str]:
    """Per unit with an engine error among its answers, the first one (in request order)."""
    at = np.flatnonzero(np.asarray(pc.is_valid(errors), bool))
    if not len(at):
        return {}
    units, first = np.unique(parent[at], return_index=True)
    texts = errors.take(pa.array(at[first])).to_pylist()
    return dict(zip(units.tolist(), texts, strict=True))


def _sums(values: pa.ChunkedArray, parent: np.ndarray, n: int) -> np.ndarray:
    """Per unit, the sum of its answers' values (an absent answer counts 0)."""
    weights = np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False), np.float64)
    return np.bincount(parent, weights=weights, minlength=n)


def _as(values: Any, type_: pa.DataType) -> pa.Array:
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values.cast(type_)
    return pa.array(values, type_)


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
