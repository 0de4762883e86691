"""Named LLM stages over Parquet, resumable and deduplicated.

``StageRunner.run(stage, rows)`` renders the stage's prompt for every row (and sample), turns
the rows into requests keyed by content, drops requests already answered (response shards on
disk) and duplicates, sorts the rest by prompt text so requests sharing a prefix stay adjacent
(the engine's prefix cache hits), runs them through the configured backend on Ray Data, writes
each shard of responses durably as it arrives, and joins everything back into output rows: the
input columns plus the contract columns of ``udfs.llm_rows``. A parse failure is a row with
``parse_ok = false`` and a reason.

Layout under ``<root>/<namespace>/<stage>/``: ``responses/shard-*.parquet`` (the request cache,
``pipelines.llm.cache``), ``output/`` (the output rows) and ``_SUCCESS.json`` (the summary). An
interrupted stage reruns only the requests no completed shard holds; a finished one reruns with
zero requests. Engine errors are rows with reasons in the output, but never cached: the next run
retries them. ``force`` sends every request of the stage again (the new answers win over the
cached ones; answers of other rows stay cached); ``plan_only`` computes nothing and marks the
rows without a cached answer ``not_run``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm import cache
from pipelines.llm.assemble import Unit, assemble
from pipelines.llm.config import LLMConfig
from udfs import storage
from udfs.choice import ChoicePlan, plan_choice
from udfs.layout import Layout
from udfs.llm_rows import (
    GENERATE,
    OPTION_SEPARATOR,
    OUTPUT_COLUMNS,
    REQUEST_SCHEMA,
    SCORE,
    merge_sampling,
    request_key,
    sample_seed,
)
from udfs.prompts import Prompt, Rendered, load_prompt
from udfs.report import RunSummary

log = logging.getLogger("augury.llm.stage")

Parser = Callable[[str], dict[str, Any]]


@dataclass(frozen=True)
class LLMStage:
    """What one stage asks of the model.

    ``variables`` maps an input row to the prompt's variables (default: the row itself).
    ``parser`` (generate only) maps raw text to the ``parsed_schema`` columns or raises
    ParseError. ``options_column`` gives per-row options for a choice prompt (default: the
    prompt's own ``options``). ``samples`` > 1 duplicates each row with distinct seeds.
    ``structured`` overrides the prompt's declared ``output`` (``{"json": schema}``,
    ``{"choice": [...]}`` or ``{"regex": ...}``), which every backend enforces as structured
    output and the runner checks before the parser runs; ``{}`` turns it off (unconstrained
    decoding, for benchmarks).
    ``structured_column`` names a column of per-row declarations (a dict or a JSON string; null:
    the stage's) for answers whose form depends on the row, e.g. its own option labels.
    ``sampling_column`` names a column of per-row sampling overrides (a dict or a JSON string)
    applied over the prompt's defaults and ``sampling``; a ``seed`` there fixes the row's seed.
    ``parse_prefix``: the parser reads the prompt's answer prefix followed by the generated text
    (the prefix, e.g. ``Question:``, is the start of the answer it parses).
    """

    name: str
    prompt_id: str
    parser: Parser | None = None
    parsed_schema: pa.Schema = field(default_factory=lambda: pa.schema([]))
    variables: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    options_column: str | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    samples: int = 1
    seed: int = 0
    structured: dict[str, Any] | None = None
    structured_column: str | None = None
    sampling_column: str | None = None
    parse_prefix: bool = False

    @property
    def prompt(self) -> Prompt:
        return load_prompt(self.prompt_id)


@dataclass
class StagePlan:
    """What a stage would send to the engine."""

    stage: str
    rows: int
    requests_total: int
    requests_unique: int
    requests_cached: int
    requests_to_compute: int
    est_prompt_tokens: int
    max_output_tokens: int

    @staticmethod
    def table(plans: list[StagePlan]) -> str:
        """The requests and estimated tokens each stage would send, one line per stage."""
        header = (
            f"{'stage':<24}{'rows':>7}{'requests':>10}{'unique':>8}{'cached':>8}{'to run':>8}"
            f"{'prompt tok':>12}{'max out tok':>13}"
        )
        lines = [header, "-" * len(header)]
        lines += [
            f"{p.stage[:23]:<24}{p.rows:>7}{p.requests_total:>10}{p.requests_unique:>8}{p.requests_cached:>8}"
            f"{p.requests_to_compute:>8}{p.est_prompt_tokens:>12}{p.max_output_tokens:>13}"
            for p in plans
        ]
        return "\n".join(lines)


class StageRunner:
    """Runs LLM stages of one pipeline under ``<root>/<namespace>/``."""

    def __init__(
        self, root: str, namespace: str, llm: LLMConfig, force: bool = False, plan_only: bool = False
    ):
        self.root, self.namespace, self.llm = root, namespace, llm
        self.force, self.plan_only = force, plan_only
        self.summaries: list[RunSummary] = []
        self.plans: list[StagePlan] = []
        self.prompts_used: dict[str, str] = {}  # stage name -> "<prompt id>@v<version>"
        self._tokenizer: Any = None
        self._tokenizer_loaded = False

    # ----------------------------------------------------------------- rendering
    @property
    def tokenizer(self):
        """The model's tokenizer (chat template, choice token ids, token estimates), or None for an
        http model whose tokenizer cannot be loaded."""
        if not self._tokenizer_loaded:
            self._tokenizer_loaded = True
            from transformers import AutoTokenizer

            if self.llm.backend in ("local", "scripted"):
                from pipelines.llm.local_model import embedded_model_dir

                self._tokenizer = AutoTokenizer.from_pretrained(
                    self.llm.model_dir or str(embedded_model_dir())
                )
            else:
                try:
                    self._tokenizer = AutoTokenizer.from_pretrained(self.llm.tokenizer_source)
                except (OSError, ValueError) as exc:
                    if self.llm.backend == "vllm":
                        raise
                    log.warning(
                        "no tokenizer for %s (%s): plain prompts, no choice requests", self.llm.model, exc
                    )
        return self._tokenizer

    def prompt_text(self, rendered: Rendered) -> str:
        """The exact text sent to the engine: chat template when the model has one, else plain."""
        tok = self.tokenizer
        if self.llm.chat_template and tok is not None and getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(rendered.messages(), add_generation_prompt=True, tokenize=False)
            return text + rendered.answer_prefix
        return rendered.plain_text()

    def _tokenize(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError(f"choice requests on the {self.llm.backend} backend need a loadable --tokenizer")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _count_tokens(self, text: str) -> int:
        return len(self._tokenize(text)) if self.tokenizer is not None else max(1, len(text) // 4)

    # ----------------------------------------------------------------- running
    def stage_uri(self, stage_name: str) -> str:
        return Layout(self.root).stage(self.namespace, stage_name)

    def run(self, stage: LLMStage, rows: pa.Table) -> pa.Table:
        """Run one stage over ``rows``; returns the output rows (see module docstring)."""
        prompt = stage.prompt
        self.prompts_used[stage.name] = f"{prompt.id}@v{prompt.version}"
        uri = self.stage_uri(stage.name)
        summary = RunSummary(name=f"{self.namespace}/{stage.name}")
        rows = _drop_contract_columns(rows, stage)
        records = rows.to_pylist()
        units, requests = self._build_requests(stage, prompt, records)
        requests_total = sum(len(u.keys) for u in units)
        cached = {} if self.force else cache.load_responses(uri, set(requests), stage.name)
        pending = [
            requests[k] for k in sorted(set(requests) - set(cached), key=lambda k: requests[k]["prompt_text"])
        ]
        summary.metrics.update(
            requests_total=requests_total,
            requests_unique=len(requests),
            duplicates_collapsed=requests_total - len(requests),
            requests_cached=len(cached),
            requests_computed=0,
        )
        if self.plan_only:
            self.plans.append(self._plan(stage.name, len(units), pending, summary))
            responses = cached
        else:
            responses = {**cached, **self._execute(stage, uri, pending, summary)}
        identity = {
            "stage": stage.name,
            "prompt_id": prompt.id,
            "prompt_version": prompt.version,
            "model": self.llm.model,
            "backend": self.llm.backend,
        }
        table = assemble(stage, prompt, identity, rows, units, responses, summary)
        summary.finish()
        if not self.plan_only:
            storage.write_dataset(table, storage.join(uri, "output"), replace="all")
            storage.mark_done(uri, summary.to_dict())
            log.info("stage %s done\n%s", stage.name, summary.table())
        self.summaries.append(summary)
        return table

    def _build_requests(
        self, stage: LLMStage, prompt: Prompt, records: list[dict[str, Any]]
    ) -> tuple[list[Unit], dict[str, dict[str, Any]]]:
        if stage.samples < 1:
            raise ValueError("samples must be >= 1")
        kind = prompt.kind
        declared = output_of(stage, prompt)
        if (declared or stage.structured_column) and kind == "choice":
            raise ValueError(f"stage {stage.name}: a choice prompt scores its options; no structured output")
        plans: dict[tuple, ChoicePlan] = {}
        units: list[Unit] = []
        requests: dict[str, dict[str, Any]] = {}
        for index, record in enumerate(records):
            variables = stage.variables(record) if stage.variables else record
            text = self.prompt_text(prompt.render(variables))
            row_sampling = _row_sampling(record, stage.sampling_column)
            row_declared = _row_mapping(record, stage.structured_column) or declared
            structured = structured_form(row_declared)
            for sample in range(stage.samples):
                sampling = merge_sampling(prompt.sampling, stage.sampling, row_sampling)
                if self.llm.max_new_tokens and kind != "choice":
                    sampling["max_tokens"] = min(sampling["max_tokens"], self.llm.max_new_tokens)
                base_seed = row_sampling.get("seed", stage.seed)
                sampling["seed"] = sample_seed(base_seed, text, sample)
                unit = Unit(index, sample, sampling, [], structured=row_declared)
                if kind == "choice":
                    options = (
                        list(record[stage.options_column]) if stage.options_column else list(prompt.options)
                    )
                    ends_with_space = text[-1:].isspace()
                    plan_key = (tuple(options), ends_with_space)
                    if plan_key not in plans:
                        plans[plan_key] = plan_choice(options, self._tokenize, ends_with_space)
                    unit.options, unit.plan = options, plans[plan_key]
                    for node in unit.plan.nodes:
                        node_text = text + (self.tokenizer.decode(node.prefix_ids) if node.prefix_ids else "")
                        key = self._add_request(requests, SCORE, node_text, sampling, list(node.token_ids))
                        requests[key]["score_token_options"] = [  # canonical tokens first; variants ""
                            OPTION_SEPARATOR.join(options[i] for i in node.groups[g])
                            if k < len(node.groups)
                            else ""
                            for k, g in enumerate(node.token_group)
                        ]
                        unit.keys.append(key)
                else:  # generate and verbalized
                    unit.keys.append(self._add_request(requests, GENERATE, text, sampling, [], structured))
                for key in unit.keys:
                    requests[key]["prompt_id"] = prompt.id
                    if self.llm.backend == "scripted":
                        requests[key]["variables_json"] = json.dumps(variables, default=str, sort_keys=True)
                units.append(unit)
        return units, requests

    def _add_request(
        self,
        requests: dict[str, dict[str, Any]],
        mode: str,
        text: str,
        sampling: dict[str, Any],
        score_ids: list[int],
        structured: str | None = None,
    ) -> str:
        key_sampling = {**sampling, "structured": structured} if structured else sampling
        key = request_key(self.llm.model, mode, text, key_sampling, score_ids)
        requests.setdefault(
            key,
            {
                "request_key": key,
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
            },
        )
        return key

    def _plan(
        self, stage_name: str, n_units: int, pending: list[dict[str, Any]], summary: RunSummary
    ) -> StagePlan:
        return StagePlan(
            stage=stage_name,
            rows=n_units,
            requests_total=summary.metrics["requests_total"],
            requests_unique=summary.metrics["requests_unique"],
            requests_cached=summary.metrics["requests_cached"],
            requests_to_compute=len(pending),
            est_prompt_tokens=sum(self._count_tokens(r["prompt_text"]) for r in pending),
            max_output_tokens=sum(1 if r["mode"] == SCORE else r["max_tokens"] for r in pending),
        )

    def _execute(
        self, stage: LLMStage, uri: str, pending: list[dict[str, Any]], summary: RunSummary
    ) -> dict[str, dict[str, Any]]:
        if not pending:
            return {}
        import ray

        from pipelines.llm.backends import apply_backend, engine_starts, responses_table
        from pipelines.llm.ray_env import ensure_ray

        ensure_ray(self.llm)
        started = engine_starts()
        table = pa.Table.from_pylist(pending, schema=REQUEST_SCHEMA)
        block = max(self.llm.batch_size, 1) * 2
        ds = ray.data.from_arrow([table.slice(i, block) for i in range(0, table.num_rows, block)])
        run_id = cache.new_run_id()
        got: dict[str, dict[str, Any]] = {}
        for shard, batch in enumerate(
            apply_backend(ds, self.llm).iter_batches(batch_size=self.llm.shard_size, batch_format="pyarrow")
        ):
            responses = responses_table(batch)
            cache.write_shard(uri, run_id, shard, responses)
            errors = responses.num_rows - pc.sum(pc.is_null(responses.column("engine_error"))).as_py()
            log.info(
                "stage %s shard %d: %d responses, %d engine errors (%d/%d done)",
                stage.name,
                shard,
                responses.num_rows,
                errors,
                len(got) + responses.num_rows,
                len(pending),
            )
            got.update({r["request_key"]: r for r in responses.to_pylist()})
        missing = {r["request_key"] for r in pending} - set(got)
        if missing:
            raise RuntimeError(f"stage {stage.name}: engine returned no response for {len(missing)} requests")
        summary.metrics["requests_computed"] = len(got)
        summary.metrics["engine_starts"] = engine_starts() - started  # model loads this stage caused
        return got


def structured_form(declared: dict[str, Any] | None) -> str | None:
    """The answer form a request carries, as JSON in its declared key order: a JSON schema's
    properties are generated in the order they are listed (xgrammar, vLLM), so sorted keys made the
    model write ``location`` before ``type`` and ``trigger``, against the prompt's own order."""
    return json.dumps(declared) if declared else None


def output_of(stage: LLMStage, prompt: Prompt) -> dict[str, Any] | None:
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


def _drop_contract_columns(rows: pa.Table, stage: LLMStage) -> pa.Table:
    """Input columns named like contract or parsed columns (provenance of an earlier stage) are
    dropped so the output's columns are unambiguous."""
    clash = [c for c in rows.column_names if c in OUTPUT_COLUMNS or c in stage.parsed_schema.names]
    if clash:
        log.debug("stage %s: dropping input columns %s (names of output columns)", stage.name, clash)
    return rows.drop_columns(clash)
