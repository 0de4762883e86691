"""Turning a stage's input rows into units and requests, one block at a time in a Ray worker.

``RequestRenderer`` is a callable ``map_batches`` UDF of plain picklable data (stage, prompt,
``RenderConfig``): it renders the prompt of every row and sample and returns one *unit* row per
(input row, sample): the input columns, the unit's sampling, request keys, options and choice
plan, its requests as a nested list in ``REQUEST_SCHEMA``, and its prompt text (``__order``), by
which the stage's units are sorted. The rows' columns are filled as plain lists and become
Arrow arrays once per batch. The tokenizer is loaded lazily, when a stage needs it (choice
plans, token counts, a chat template), and once per worker process and source
(``pipelines.llm.tokenizer``): Ray Data runs the UDF as tasks in reused workers, so later stages
of a run render without loading it again, where an actor pool would start a process and load it
for every stage; a worker an actor took over is replaced by a fresh one. Nothing of this runs on
the driver.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines.llm.config import LLMConfig
from pipelines.llm.tokenizer import has_chat_template, load_tokenizer
from udfs.choice import ChoiceNode, ChoicePlan, plan_choice
from udfs.llm_rows import (
    GENERATE,
    OPTION_SEPARATOR,
    REQUEST_SCHEMA,
    SCORE,
    keyed,
    merge_sampling,
    request_key,
    sample_seed,
    sampling_key,
)
from udfs.prompts import Prompt, Rendered

log = logging.getLogger("augury.llm.stage")

ROW, SAMPLE = "__row", "__sample"  # a unit's input position and sample index
ORDER = "__order"  # a unit's prompt text (without a choice node's continuation)
SAMPLING_TYPE = pa.struct(
    [
        pa.field("temperature", pa.float64()),
        pa.field("top_p", pa.float64()),
        pa.field("max_tokens", pa.int32()),
        pa.field("seed", pa.int64()),
        pa.field("params", pa.string()),  # every parameter, as JSON with sorted keys
    ]
)
UNIT_FIELDS = [
    pa.field(SAMPLE, pa.int32()),
    pa.field("__sampling", SAMPLING_TYPE),  # the unit's sampling parameters
    pa.field("__keys", pa.list_(pa.string())),  # its request keys, in plan-node order
    pa.field("__options", pa.list_(pa.string())),  # choice: the row's options
    pa.field("__plan", pa.string()),  # choice: the ChoicePlan as JSON
    pa.field("__structured", pa.string()),  # the declared answer form as JSON
    pa.field("__requests", pa.list_(pa.struct(list(REQUEST_SCHEMA)))),
    pa.field(ORDER, pa.string()),
]
UNIT_COLUMNS = [ROW] + [f.name for f in UNIT_FIELDS]


@dataclass(frozen=True)
class RenderConfig:
    """The part of ``LLMConfig`` rendering needs (no script, nothing unpicklable)."""

    backend: str
    model: str
    tokenizer_source: str
    model_dir: str | None
    chat_template: bool
    max_new_tokens: int | None

    @staticmethod
    def of(llm: LLMConfig) -> RenderConfig:
        return RenderConfig(
            llm.backend, llm.model, llm.tokenizer_source, llm.model_dir, llm.chat_template, llm.max_new_tokens
        )


class Tokenizing:
    """Rendering and counting with the model's tokenizer, loaded on first use in the process."""

    def __init__(self, cfg: RenderConfig):
        self.cfg = cfg

    @property
    def tokenizer(self) -> Any:
        return load_tokenizer(self.cfg)

    def prompt_text(self, rendered: Rendered) -> str:
        """The exact text sent to the engine: chat template when the model has one, else plain."""
        if self.cfg.chat_template and has_chat_template(self.cfg):
            text = self.tokenizer.apply_chat_template(
                rendered.messages(), add_generation_prompt=True, tokenize=False
            )
            return text + rendered.answer_prefix
        return rendered.plain_text()

    def tokenize(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError(f"choice requests on the {self.cfg.backend} backend need a loadable --tokenizer")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text)) if self.tokenizer is not None else max(1, len(text) // 4)


class RequestRenderer(Tokenizing):
    """``map_batches`` UDF: input rows (with ``__row``) to unit rows (see the module docstring)."""

    def __init__(self, cfg: RenderConfig, stage: Any, prompt: Prompt):
        super().__init__(cfg)
        self.stage, self.prompt = stage, prompt
        self.declared = output_of(stage, prompt)
        self.plans: dict[tuple, ChoicePlan] = {}
        self.forms = _forms(self.declared)
        self.greedy_keys: dict[str | None, str] = {}  # by declaration: the stage's greedy sampling key

    def __call__(self, batch: pa.Table) -> pa.Table:
        units = _Units()
        for i, record in enumerate(batch.drop_columns([ROW]).to_pylist()):
            self.units(units, i, record)
        return units.table(batch)

    def units(self, out: _Units, i: int, record: dict[str, Any]) -> None:
        """Add the unit rows of input row ``i`` to ``out``: one per sample, each with its requests."""
        stage, prompt = self.stage, self.prompt
        variables = stage.variables(record) if stage.variables else record
        text = self.prompt_text(prompt.render(variables))
        row_sampling = _row_sampling(record, stage.sampling_column)
        declared = _row_mapping(record, stage.structured_column)
        structured, canonical = _forms(declared) if declared else self.forms
        scripted = self.cfg.backend == "scripted"
        out.row_fields = {
            "prompt_id": prompt.id,
            "variables_json": json.dumps(variables, default=str, sort_keys=True) if scripted else None,
        }
        for sample in range(stage.samples):
            sampling = merge_sampling(prompt.sampling, stage.sampling, row_sampling)
            if self.cfg.max_new_tokens and prompt.kind != "choice":
                sampling["max_tokens"] = min(sampling["max_tokens"], self.cfg.max_new_tokens)
            sampling["seed"] = sample_seed(row_sampling.get("seed", stage.seed), text, sample)
            options, plan = None, None
            if prompt.kind == "choice":
                options = list(record[stage.options_column]) if stage.options_column else list(prompt.options)
                plan = self.plan(options, text[-1:].isspace())
                for node in plan.nodes:
                    self.score_request(out, text, sampling, options, node)
            else:  # generate and verbalized
                key = keyed(
                    self.cfg.model, GENERATE, text, self.sampling_key(sampling, canonical, row_sampling), []
                )
                out.request(key, text, GENERATE, sampling, structured)
            out.unit(i, sample, sampling, options, plan_to_json(plan) if plan else None, structured, text)

    def sampling_key(
        self, sampling: dict[str, Any], canonical: str | None, row_sampling: dict[str, Any]
    ) -> str:
        """The sampling part of a generate request's key (``udfs.llm_rows.sampling_key``), the
        declaration included; a greedy stage without per-row sampling has one per declaration."""
        if row_sampling or sampling["temperature"] != 0:
            return sampling_key(GENERATE, {**sampling, "structured": canonical} if canonical else sampling)
        if canonical not in self.greedy_keys:
            self.greedy_keys[canonical] = sampling_key(
                GENERATE, {**sampling, "structured": canonical} if canonical else sampling
            )
        return self.greedy_keys[canonical]

    def plan(self, options: list[str], ends_with_space: bool) -> ChoicePlan:
        """The choice plan of an option set, built once per worker."""
        key = (tuple(options), ends_with_space)
        if key not in self.plans:
            self.plans[key] = plan_choice(options, self.tokenize, ends_with_space)
        return self.plans[key]

    def score_request(
        self, out: _Units, text: str, sampling: dict[str, Any], options: list[str], node: ChoiceNode
    ) -> None:
        """The scoring request of one choice-plan node; canonical tokens first, variants ``""``."""
        node_text = text + (self.tokenizer.decode(node.prefix_ids) if node.prefix_ids else "")
        ids = list(node.token_ids)
        token_options = [
            OPTION_SEPARATOR.join(options[i] for i in node.groups[g]) if k < len(node.groups) else ""
            for k, g in enumerate(node.token_group)
        ]
        key = request_key(self.cfg.model, SCORE, node_text, sampling, ids)
        out.request(key, node_text, SCORE, sampling, None, ids, token_options)


class _Units:
    """The columns of a batch's unit rows and of their requests, filled row by row."""

    def __init__(self) -> None:
        self.take: list[int] = []
        self.columns: dict[str, list[Any]] = {f.name: [] for f in UNIT_FIELDS if f.name != "__requests"}
        self.requests: dict[str, list[Any]] = {f.name: [] for f in REQUEST_SCHEMA}
        self.offsets = [0]
        self.row_fields: dict[str, Any] = {}  # request fields of the row being rendered

    def request(
        self,
        key: str,
        text: str,
        mode: str,
        sampling: dict[str, Any],
        structured: str | None,
        score_ids: list[int] | None = None,
        score_options: list[str] | None = None,
    ) -> None:
        """One request of the unit being built, keyed by its content."""
        r = self.requests
        r["request_key"].append(key)
        r["prompt_text"].append(text)
        r["mode"].append(mode)
        r["temperature"].append(float(sampling["temperature"]))
        r["top_p"].append(float(sampling["top_p"]))
        r["max_tokens"].append(int(sampling["max_tokens"]))
        r["seed"].append(int(sampling["seed"]))
        r["stop"].append(list(sampling["stop"]))
        r["structured"].append(structured)
        r["score_token_ids"].append(score_ids or [])
        r["score_token_options"].append(score_options or [])
        r["prompt_id"].append(self.row_fields["prompt_id"])
        r["variables_json"].append(self.row_fields["variables_json"])

    def unit(
        self,
        i: int,
        sample: int,
        sampling: dict[str, Any],
        options: list[str] | None,
        plan: str | None,
        structured: str | None,
        text: str,
    ) -> None:
        """The unit of input row ``i`` and ``sample``, owning the requests added since the last one."""
        c = self.columns
        self.take.append(i)
        c[SAMPLE].append(sample)
        c["__sampling"].append(
            {
                "temperature": sampling["temperature"],
                "top_p": sampling["top_p"],
                "max_tokens": sampling["max_tokens"],
                "seed": sampling["seed"],
                "params": json.dumps(sampling, sort_keys=True),
            }
        )
        c["__keys"].append(self.requests["request_key"][self.offsets[-1] :])
        c["__options"].append(options)
        c["__plan"].append(plan)
        c["__structured"].append(structured)
        c[ORDER].append(text)
        self.offsets.append(len(self.requests["request_key"]))

    def table(self, batch: pa.Table) -> pa.Table:
        """The unit rows: the input rows they come from, then the unit columns."""
        rows = batch.take(pa.array(self.take, pa.int64()))
        requests = pa.StructArray.from_arrays(
            [pa.array(self.requests[f.name], f.type) for f in REQUEST_SCHEMA], fields=list(REQUEST_SCHEMA)
        )
        nested = pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32()), requests)
        for f in UNIT_FIELDS:
            column = nested if f.name == "__requests" else pa.array(self.columns[f.name], f.type)
            rows = rows.append_column(f, column)
        return rows


def plan_to_json(plan: ChoicePlan) -> str:
    """A ChoicePlan as JSON, to travel in a unit row between Ray tasks."""
    nodes = [[n.prefix_ids, n.token_ids, n.token_group, n.groups] for n in plan.nodes]
    return json.dumps({"options": plan.options, "nodes": nodes, "paths": plan.paths})


def plan_from_json(text: str) -> ChoicePlan:
    """The ChoicePlan ``plan_to_json`` wrote."""
    data = json.loads(text)
    nodes = tuple(
        ChoiceNode(tuple(prefix), tuple(ids), tuple(group), tuple(tuple(g) for g in groups))
        for prefix, ids, group, groups in data["nodes"]
    )
    paths = tuple(tuple(tuple(step) for step in path) for path in data["paths"])
    return ChoicePlan(tuple(data["options"]), nodes, paths)


def _forms(declared: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """A declaration as sent (``structured_form``) and as its cache key reads it: with sorted
    keys, since the order of a schema's properties shapes the answer the engine writes, not
    whether a cached answer is valid for it."""
    return structured_form(declared), json.dumps(declared, sort_keys=True) if declared else None


def structured_form(declared: dict[str, Any] | None) -> str | None:
    """The answer form a request carries, as JSON in its declared key order: a JSON schema's
    properties are generated in the order they are listed (xgrammar, vLLM), so sorted keys made the
    model write ``location`` before ``type`` and ``trigger``, against the prompt's own order."""
    return json.dumps(declared) if declared else None


def output_of(stage: Any, prompt: Prompt) -> dict[str, Any] | None:
    """The answer form a stage's requests must take: the stage's override (``{}``: none) or the
    prompt's own."""
    return prompt.output if stage.structured is None else (stage.structured or None)


def _row_mapping(record: dict[str, Any], column: str | None) -> dict[str, Any]:
    """A per-row mapping column (a dict or a JSON string); empty when absent or null."""
    if column is None or record.get(column) is None:
        return {}
    value = record[column]
    return json.loads(value) if isinstance(value, str) else dict(value)


def _row_sampling(record: dict[str, Any], column: str | None) -> dict[str, Any]:
    return {k: v for k, v in _row_mapping(record, column).items() if v is not None}
