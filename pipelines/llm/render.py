"""Turning a stage's input rows into units and requests, one block at a time in a Ray worker.

``RequestRenderer`` is a callable ``map_batches`` UDF of plain picklable data (stage, prompt,
``RenderConfig``): it renders the prompt of every row and sample and returns one *unit* row per
(input row, sample): the input columns, the unit's sampling, request keys, options and choice
plan, and its requests as a nested list in ``REQUEST_SCHEMA`` (``explode_requests`` flattens
them). The tokenizer is loaded lazily and once per worker process (``load_tokenizer`` is cached
there): Ray Data runs the UDF as tasks in reused workers, so later stages of a run render without
loading it again, where an actor pool would start a process and load it for every stage.
Nothing of this runs on the driver.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.config import LLMConfig
from udfs.choice import ChoiceNode, ChoicePlan, plan_choice
from udfs.llm_rows import (
    GENERATE,
    OPTION_SEPARATOR,
    REQUEST_SCHEMA,
    SCORE,
    merge_sampling,
    request_key,
    sample_seed,
)
from udfs.prompts import Prompt, Rendered

log = logging.getLogger("augury.llm.stage")

ROW, SAMPLE = "__row", "__sample"  # a unit's input position and sample index
COPIES = "__copies"  # of a unique request: how many requests of the stage it stands for
UNIT_FIELDS = [
    pa.field(SAMPLE, pa.int32()),
    pa.field("__sampling", pa.string()),  # the unit's sampling parameters as JSON
    pa.field("__keys", pa.list_(pa.string())),  # its request keys, in plan-node order
    pa.field("__options", pa.list_(pa.string())),  # choice: the row's options
    pa.field("__plan", pa.string()),  # choice: the ChoicePlan as JSON
    pa.field("__structured", pa.string()),  # the declared answer form as JSON
    pa.field("__requests", pa.list_(pa.struct(list(REQUEST_SCHEMA)))),
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


@functools.lru_cache(maxsize=4)
def load_tokenizer(cfg: RenderConfig) -> Any:
    """The model's tokenizer (chat template, choice token ids, token estimates), or None for an
    http model whose tokenizer cannot be loaded."""
    from transformers import AutoTokenizer

    if cfg.backend in ("local", "scripted"):
        from pipelines.llm.local_model import model_path

        return AutoTokenizer.from_pretrained(model_path(cfg.model_dir))
    try:
        return AutoTokenizer.from_pretrained(cfg.tokenizer_source)
    except (OSError, ValueError) as exc:
        if cfg.backend == "vllm":
            raise
        log.warning("no tokenizer for %s (%s): plain prompts, no choice requests", cfg.model, exc)
        return None


class Tokenizing:
    """Rendering and counting with the model's tokenizer, loaded on first use in the process."""

    def __init__(self, cfg: RenderConfig):
        self.cfg = cfg

    @property
    def tokenizer(self) -> Any:
        return load_tokenizer(self.cfg)

    def prompt_text(self, rendered: Rendered) -> str:
        """The exact text sent to the engine: chat template when the model has one, else plain."""
        tok = self.tokenizer if self.cfg.chat_template else None
        if tok is not None and getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(rendered.messages(), add_generation_prompt=True, tokenize=False)
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

    def __call__(self, batch: pa.Table) -> pa.Table:
        units: list[dict[str, Any]] = []
        take: list[int] = []
        for i, record in enumerate(batch.drop_columns([ROW]).to_pylist()):
            for unit in self.units(record):
                units.append(unit)
                take.append(i)
        rows = batch.take(pa.array(take, pa.int64()))
        for f in UNIT_FIELDS:
            rows = rows.append_column(f, pa.array([u[f.name] for u in units], f.type))
        return rows

    def units(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The unit rows of one input row: one per sample, each with its requests."""
        stage, prompt = self.stage, self.prompt
        variables = stage.variables(record) if stage.variables else record
        text = self.prompt_text(prompt.render(variables))
        row_sampling = _row_sampling(record, stage.sampling_column)
        row_declared = _row_mapping(record, stage.structured_column) or self.declared
        structured = structured_form(row_declared)
        scripted = self.cfg.backend == "scripted"
        variables_json = json.dumps(variables, default=str, sort_keys=True) if scripted else None
        out = []
        for sample in range(stage.samples):
            sampling = merge_sampling(prompt.sampling, stage.sampling, row_sampling)
            if self.cfg.max_new_tokens and prompt.kind != "choice":
                sampling["max_tokens"] = min(sampling["max_tokens"], self.cfg.max_new_tokens)
            sampling["seed"] = sample_seed(row_sampling.get("seed", stage.seed), text, sample)
            unit: dict[str, Any] = {
                SAMPLE: sample,
                "__sampling": json.dumps(sampling),
                "__options": None,
                "__plan": None,
                "__structured": json.dumps(row_declared) if row_declared else None,
            }
            if prompt.kind == "choice":
                options = list(record[stage.options_column]) if stage.options_column else list(prompt.options)
                plan = self.plan(options, text[-1:].isspace())
                requests = [self.score_request(text, sampling, options, node) for node in plan.nodes]
                unit.update({"__options": options, "__plan": plan_to_json(plan)})
            else:  # generate and verbalized
                requests = [self.request(GENERATE, text, sampling, [], structured)]
            for request in requests:
                request.update(prompt_id=prompt.id, variables_json=variables_json)
            unit.update({"__keys": [r["request_key"] for r in requests], "__requests": requests})
            out.append(unit)
        return out

    def plan(self, options: list[str], ends_with_space: bool) -> ChoicePlan:
        """The choice plan of an option set, built once per worker."""
        key = (tuple(options), ends_with_space)
        if key not in self.plans:
            self.plans[key] = plan_choice(options, self.tokenize, ends_with_space)
        return self.plans[key]

    def score_request(
        self, text: str, sampling: dict[str, Any], options: list[str], node: ChoiceNode
    ) -> dict[str, Any]:
        """The scoring request of one choice-plan node; canonical tokens first, variants ``""``."""
        node_text = text + (self.tokenizer.decode(node.prefix_ids) if node.prefix_ids else "")
        request = self.request(SCORE, node_text, sampling, list(node.token_ids))
        request["score_token_options"] = [
            OPTION_SEPARATOR.join(options[i] for i in node.groups[g]) if k < len(node.groups) else ""
            for k, g in enumerate(node.token_group)
        ]
        return request

    def request(
        self,
        mode: str,
        text: str,
        sampling: dict[str, Any],
        score_ids: list[int],
        structured: str | None = None,
    ) -> dict[str, Any]:
        """One request row, keyed by its content."""
        key_sampling = {**sampling, "structured": structured} if structured else sampling
        return {
            "request_key": request_key(self.cfg.model, mode, text, key_sampling, score_ids),
            "prompt_text": text,
            "mode": mode,
            "temperature": float(sampling["temperature"]),
            "top_p": float(sampling["top_p"]),
            "max_tokens": int(sampling["max_tokens"]),
            "seed": int(sampling["seed"]),
            "stop": list(sampling["stop"]),
            "structured": structured,
            "score_token_ids": score_ids,
            "score_token_options": [],
            "prompt_id": None,
            "variables_json": None,
        }


class TokenEstimator(Tokenizing):
    """``map_batches`` UDF for ``--plan``: each request's estimated prompt tokens and its output
    budget (one token for a scoring request)."""

    def __call__(self, batch: pa.Table) -> pa.Table:
        tokens = [self.count_tokens(t) for t in batch.column("prompt_text").to_pylist()]
        budget = pc.if_else(
            pc.equal(batch.column("mode"), SCORE), 1, batch.column("max_tokens").cast(pa.int64())
        )
        return pa.table({"prompt_tokens": pa.array(tokens, pa.int64()), "output_tokens": budget})


def explode_requests(units: pa.Table) -> pa.Table:
    """The requests of a block of units, one row each, with the position of the unit that made it
    (``__row``: the earliest copy of a request wins when duplicates collapse)."""
    nested = units.column("__requests").combine_chunks()
    flat = pc.list_flatten(nested)
    if not len(flat):
        return REQUEST_SCHEMA.empty_table().append_column(ROW, pa.array([], pa.int64()))
    table = pa.Table.from_struct_array(flat).cast(REQUEST_SCHEMA)
    return table.append_column(ROW, units.column(ROW).take(pc.list_parent_indices(nested)))


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
