"""Named LLM stages over Parquet, resumable and deduplicated.

``StageRunner.run(stage, rows)`` is one Ray Data execution (``pipelines.llm.flow``): Ray workers
render the stage's prompt for every row (and sample) into requests keyed by content, drop
duplicates and requests already answered (response shards on disk), send the rest through the
configured backend in prompt order (requests sharing a prefix stay adjacent, so the engine's
prefix cache hits), write the responses as durable shards as they arrive, and assemble the output
rows: the input columns plus the contract columns of ``udfs.llm_rows``. A parse failure is a row
with ``parse_ok = false`` and a reason. The driver sees counts and, at the end, the output table.

Layout under ``<root>/<namespace>/<stage>/``: ``responses/shard-*.parquet`` (the request cache,
``pipelines.llm.cache``), ``output/`` (the output rows, each with its position ``__row`` and
``__sample`` and its request counts) and ``_SUCCESS.json`` (the summary); a run's intermediate
Parquet lives under ``<root>/<namespace>/_scratch/`` and is deleted after it. An interrupted
stage reruns only the requests no completed shard holds; a finished one reruns with zero
requests. Engine errors are rows with reasons in the output, but never cached: the next run
retries them. ``force`` sends every request of the stage again (the new answers win over the
cached ones; answers of other rows stay cached); ``plan_only`` computes nothing and marks the
rows without a cached answer ``not_run``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines.llm import cache
from pipelines.llm.assemble import empty_output, summarize
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import RenderConfig, RequestRenderer, output_of
from udfs import storage
from udfs.layout import Layout
from udfs.llm_rows import OUTPUT_COLUMNS
from udfs.prompts import Prompt, load_prompt
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

    def stage_uri(self, stage_name: str) -> str:
        return Layout(self.root).stage(self.namespace, stage_name)

    def run(self, stage: LLMStage, rows: pa.Table) -> pa.Table:
        """Run one stage over ``rows``; returns the output rows (see module docstring)."""
        prompt = stage.prompt
        _check(stage, prompt)
        self.prompts_used[stage.name] = f"{prompt.id}@v{prompt.version}"
        uri = self.stage_uri(stage.name)
        summary = RunSummary(name=f"{self.namespace}/{stage.name}")
        rows = _drop_contract_columns(rows, stage)
        identity = {
            "stage": stage.name,
            "prompt_id": prompt.id,
            "prompt_version": prompt.version,
            "model": self.llm.model,
            "backend": self.llm.backend,
        }
        inputs = None if self.plan_only else _fingerprint(stage, prompt, rows, RenderConfig.of(self.llm))
        if rows.num_rows:
            table = self._run_on_ray(stage, prompt, identity, rows, uri, summary, inputs)
        else:
            table = empty_output(stage, rows)
            summary.metrics.update(dict.fromkeys(COUNTS, 0))
            if self.plan_only:
                self.plans.append(self._plan(stage.name, 0, summary, (0, 0)))
        summarize(table, summary)
        summary.finish()
        if not self.plan_only:
            if not rows.num_rows:
                storage.write_dataset(table, storage.join(uri, "output"), replace="all")
            storage.mark_done(uri, {**summary.to_dict(), "inputs": inputs})
            log.info("stage %s done\n%s", stage.name, summary.table())
        self.summaries.append(summary)
        return table

    def _run_on_ray(
        self,
        stage: LLMStage,
        prompt: Prompt,
        identity: dict[str, Any],
        rows: pa.Table,
        uri: str,
        summary: RunSummary,
        inputs: str | None,
    ) -> pa.Table:
        """The stage as one Ray Data execution (``pipelines.llm.flow``). A stage that finished
        before on the same inputs runs without a backend (no engine starts for it); should a
        request turn out not to be cached after all (its shards were removed, its code changed),
        the stage runs again with one."""
        from pipelines.llm.ray_env import ensure_ray
        from pipelines.llm.scripted import ship_by_value

        ensure_ray(self.llm)
        ship_by_value(stage.parser, stage.variables)
        answered = not self.force and inputs is not None and _answered_before(uri, inputs)
        table, counts = self._execute(
            stage, prompt, identity, rows, uri, engine=not (self.plan_only or answered)
        )
        if answered and counts["__n_unique"] > counts["__n_cached"]:
            log.info("stage %s: answered before, but not every request is cached: running it", stage.name)
            table, counts = self._execute(stage, prompt, identity, rows, uri, engine=True)
        total, unique, cached = counts["__n_requests"], counts["__n_unique"], counts["__n_cached"]
        summary.metrics.update(
            requests_total=total,
            requests_unique=unique,
            duplicates_collapsed=total - unique,
            requests_cached=cached,
            requests_computed=counts.get("computed", 0),
        )
        if "engine_starts" in counts:
            summary.metrics["engine_starts"] = counts["engine_starts"]  # model loads this stage caused
        if self.plan_only:
            tokens = (counts["__n_prompt_tokens"], counts["__n_output_tokens"])
            self.plans.append(self._plan(stage.name, table.num_rows, summary, tokens))
        return table

    def _execute(
        self,
        stage: LLMStage,
        prompt: Prompt,
        identity: dict[str, Any],
        rows: pa.Table,
        uri: str,
        engine: bool,
    ) -> tuple[pa.Table, dict[str, int]]:
        """One execution of the stage; returns its output rows and its counts (the sums of the
        output's count columns, the responses computed and the engines started)."""
        from pipelines.llm import flow
        from pipelines.llm.backends import engine_starts
        from pipelines.llm.partition import Place, StageWork

        render_cfg = RenderConfig.of(self.llm)
        parts = [*self.namespace.split("/"), "_scratch", f"{stage.name}-{uuid.uuid4().hex[:8]}"]
        scratch = storage.join(self.root, *parts)
        # a plan writes nothing: it removes every directory its scratch created
        created = _first_missing(self.root, parts) if self.plan_only else scratch
        output_uri = storage.join(scratch if self.plan_only else uri, "output")
        try:
            shards = [] if self.force else cache.usable_shards(uri, stage.name)
            run_id = cache.new_run_id()
            work = StageWork(
                stage,
                prompt,
                identity,
                render_cfg,
                output=Place.of(output_uri),
                parts=Place.of(storage.join(scratch, "parts")),
                shards=Place.of(cache.responses_dir(uri)),
                shard_size=self.llm.shard_size,
                run_id=run_id,
                index=cache.index_ref(shards),
                engine=engine,
                estimate=self.plan_only,
            )
            storage.delete(output_uri)
            started = engine_starts()
            with flow.stage_context():
                flow.execute(rows, RequestRenderer(render_cfg, stage, prompt), work, self.llm)
            table, counts = flow.read_output(output_uri, rows.num_rows, stage.samples)
            if engine:
                pending = counts["__n_unique"] - counts["__n_cached"]
                counts["computed"] = self._count_computed(stage, uri, run_id, pending)
                counts["engine_starts"] = engine_starts() - started
            return table, counts
        finally:
            storage.delete(created)

    def _plan(self, stage_name: str, n_units: int, summary: RunSummary, tokens: tuple[int, int]) -> StagePlan:
        m = summary.metrics
        return StagePlan(
            stage=stage_name,
            rows=n_units,
            requests_total=m["requests_total"],
            requests_unique=m["requests_unique"],
            requests_cached=m["requests_cached"],
            requests_to_compute=m["requests_unique"] - m["requests_cached"],
            est_prompt_tokens=tokens[0],
            max_output_tokens=tokens[1],
        )

    def _count_computed(self, stage: LLMStage, uri: str, run_id: str, pending: int) -> int:
        """The responses of this run's shards (from their footers), logged shard by shard."""
        done = 0
        for shard in cache.run_shards(uri, run_id):
            responses, errors = cache.shard_counts(shard)
            done += responses
            log.info(
                "stage %s shard %s: %d responses, %d engine errors (%d/%d done)",
                stage.name,
                shard.rsplit("/", 1)[-1],
                responses,
                errors,
                done,
                pending,
            )
        if done < pending:
            raise RuntimeError(
                f"stage {stage.name}: engine returned no response for {pending - done} requests"
            )
        return done


COUNTS = ("requests_total", "requests_unique", "duplicates_collapsed", "requests_cached", "requests_computed")


def _first_missing(root: str, parts: list[str]) -> str:
    """The outermost directory on the way from ``root`` down through ``parts`` that does not
    exist yet."""
    for n in range(1, len(parts)):
        if not storage.exists(storage.join(root, *parts[:n])):
            return storage.join(root, *parts[:n])
    return storage.join(root, *parts)


def _fingerprint(stage: LLMStage, prompt: Prompt, rows: pa.Table, render: RenderConfig) -> str:
    """A digest of a stage's input rows and of the settings its requests are rendered from (the
    prompt's version, the stage's sampling and columns, the model and backend); its code
    (``variables``) is not in it."""
    digest = hashlib.blake2b(digest_size=16)
    settings = {
        "prompt": f"{prompt.id}@v{prompt.version}",
        "render": dataclasses.asdict(render),
        **{f.name: getattr(stage, f.name) for f in dataclasses.fields(stage) if f.name not in _CODE},
    }
    digest.update(json.dumps(settings, default=str, sort_keys=True).encode())
    with pa.ipc.new_stream(pa.PythonFile(_Digest(digest), mode="w"), rows.schema) as writer:
        writer.write_table(rows)
    return digest.hexdigest()


_CODE = ("parser", "variables", "parsed_schema")  # stage fields that are code, or say nothing of requests


class _Digest:
    """A write-only file that feeds a digest."""

    def __init__(self, digest: Any):
        self.digest, self.closed = digest, False

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _answered_before(uri: str, inputs: str) -> bool:
    """Whether the stage's last run finished on the same inputs with no engine error."""
    if not storage.is_done(uri):
        return False
    marker = storage.read_marker(uri)
    errors = any(reason.startswith("engine") for reason in marker.get("rejected_by_reason", {}))
    return marker.get("inputs") == inputs and not errors


def _check(stage: LLMStage, prompt: Prompt) -> None:
    """Stage settings that no row can make valid."""
    if stage.samples < 1:
        raise ValueError("samples must be >= 1")
    if (output_of(stage, prompt) or stage.structured_column) and prompt.kind == "choice":
        raise ValueError(f"stage {stage.name}: a choice prompt scores its options; no structured output")


def _drop_contract_columns(rows: pa.Table, stage: LLMStage) -> pa.Table:
    """Input columns named like contract or parsed columns (provenance of an earlier stage) are
    dropped so the output's columns are unambiguous."""
    clash = [c for c in rows.column_names if c in OUTPUT_COLUMNS or c in stage.parsed_schema.names]
    if clash:
        log.debug("stage %s: dropping input columns %s (names of output columns)", stage.name, clash)
    return rows.drop_columns(clash)
