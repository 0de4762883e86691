"""The three engines behind one contract: a Ray Dataset of requests in, a Dataset of responses out.

- ``vllm``: one Ray Serve LLM deployment per run (``pipelines.llm.serve_engine``), every stage's
  requests sent to it by ``ray.data.llm.build_processor(ServeDeploymentProcessorConfig(...))``.
- ``http``: ``HttpRequestProcessorConfig`` against any OpenAI-compatible ``/v1/completions``
  server (``vllm serve`` in production, ``python -m pipelines.llm.serve_local`` on a laptop).
- ``local``: ``LocalEngine`` (transformers, CPU) as a Ray Data actor stage.
- ``scripted``: ``ScriptedEngine`` replays well-formed answers per prompt id (builder tests).

Prompts arrive fully rendered (chat template already applied by the stage runner), so every
backend sees byte-identical text. ``engine_starts()`` counts the engines this process started.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.llm.config import LLMConfig
from udfs.llm_rows import RESPONSE_SCHEMA, SCORE, cut_at_stop

_CARRIED = ("request_key", "mode", "score_token_ids", "stop")


Consumer = tuple[type, dict[str, Any]]  # a ``map_batches`` class and its constructor kwargs


def apply_backend(ds, cfg: LLMConfig, then: Consumer, carry: Sequence[str] = ()):
    """Send a Ray Dataset of requests through the configured engine and hand each batch of
    responses, with the ``carry`` columns of its requests, to ``then``; returns what ``then``
    returns. The in-process engines (``local``, ``scripted``) answer a block in batches of
    ``batch_size``, in order, and ``then`` runs in the engine's own task, each batch handed on
    as it is answered. A ``ray.data.llm`` processor gets blocks of ``max(batch_size,
    shard_size)`` requests (an engine task answers one block), and ``then`` runs in one actor
    after it."""
    import ray.data

    carry = tuple(carry)
    engine = _in_process_engine(cfg)
    if engine is not None:
        return ds.map_batches(
            answer_then,
            fn_kwargs={"engine": engine, "then": then, "carry": carry, "batch_size": cfg.batch_size},
            batch_size=None,
            batch_format="pyarrow",
            compute=ray.data.TaskPoolStrategy(size=cfg.concurrency if cfg.backend == "local" else 1),
            num_cpus=0,  # the local engines' actors hold the CPUs; these tasks wait on them
        )
    blocks = ds.repartition(target_num_rows_per_block=max(cfg.batch_size, cfg.shard_size))
    return _processor(cfg, carry)(blocks).map_batches(
        then[0],
        fn_constructor_kwargs=then[1],
        batch_size=None,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0,
    )


def _in_process_engine(cfg: LLMConfig) -> Consumer | None:
    """The engine UDF of the ``local`` and ``scripted`` backends; None for the processors."""
    if cfg.backend == "local":
        return _LocalEngineClient, {"engines": local_engine_actors(cfg)}
    if cfg.backend == "scripted":
        from pipelines.llm.scripted import ScriptedEngine, ship_script

        return ScriptedEngine, {"script": ship_script(cfg.script)}
    return None


def answer_then(
    block: pa.Table, engine: Consumer, then: Consumer, carry: tuple[str, ...], batch_size: int
) -> pa.Table:
    """An in-process engine and the consumer of its responses in one Ray task, over one block
    (one partition's requests: ``flow.stage_context`` keeps Ray Data from splitting it). A task,
    not an actor: Ray reuses its worker processes, where an actor per stage started a process."""
    answer, consume = engine[0](**engine[1]), then[0](**then[1])
    outputs = []
    for start in range(0, block.num_rows, batch_size):
        batch = block.slice(start, batch_size)
        outputs.append(consume(with_carried(answer(batch.drop_columns(list(carry))), batch, carry)))
    return pa.concat_tables(outputs) if outputs else pa.table({})


def _processor(cfg: LLMConfig, carry: tuple[str, ...]):
    """The ``ray.data.llm`` processor of the ``vllm`` or ``http`` backend."""
    from ray.data.llm import build_processor

    if cfg.backend == "vllm":
        from ray.data.llm import ServeDeploymentProcessorConfig

        from pipelines.llm.serve_engine import ensure_deployment

        name = ensure_deployment(cfg)  # one engine per run: every stage talks to the same one
        config = ServeDeploymentProcessorConfig(
            deployment_name=name,
            app_name=name,
            dtype_mapping={"CompletionRequest": JsonCompletionRequest},
            batch_size=cfg.batch_size,
            concurrency=cfg.concurrency,
            should_continue_on_error=True,
        )
        processor = build_processor(
            config,
            preprocess=lambda row: serve_request(row, cfg),
            postprocess=lambda row: {**completion_response(row, row), **{c: row[c] for c in carry}},
        )
    else:
        processor = build_processor(
            http_processor_config(cfg),
            preprocess=lambda row: {"payload": completion_payload(row, cfg)},
            postprocess=lambda row: {
                **completion_response(row, row.get("http_response") or {}),
                **{c: row[c] for c in carry},
            },
        )
    return processor


_LOCAL_ENGINES: dict[tuple, list[Any]] = {}


def local_engine_actors(cfg: LLMConfig) -> list[Any]:
    """Handles of the long-lived local engine actors (``cfg.concurrency`` of them), created on
    first use and owned by the driver: the model loads once per actor and serves every later
    stage of the process instead of reloading per stage."""
    import ray

    from pipelines.llm.local_engine import LocalEngine

    key = (cfg.model_dir, cfg.max_input_tokens, cfg.concurrency, ray.get_runtime_context().get_job_id())
    if key not in _LOCAL_ENGINES:
        engine = ray.remote(LocalEngine).options(num_cpus=1)
        _LOCAL_ENGINES[key] = [
            engine.remote(model_dir=cfg.model_dir, max_input_tokens=cfg.max_input_tokens)
            for _ in range(cfg.concurrency)
        ]
    return _LOCAL_ENGINES[key]


def engine_starts() -> int:
    """Engines (local actors, vLLM replicas) this process has started: each loads the model once."""
    from pipelines.llm.serve_engine import engine_starts as replicas

    return sum(len(actors) for actors in _LOCAL_ENGINES.values()) + replicas()


class _LocalEngineClient:
    """The in-process engine of the ``local`` backend: hands request batches to one of the
    long-lived engine actors (``answer_then`` carries the request columns over)."""

    def __init__(self, engines: list[Any]):
        self.engine = engines[os.getpid() % len(engines)]

    def __call__(self, batch: pa.Table) -> pa.Table:
        import ray

        return ray.get(self.engine.run.remote(batch))


def with_carried(responses: pa.Table, requests: pa.Table, carry: Sequence[str]) -> pa.Table:
    """An engine's responses (in request order) with the ``carry`` columns of their requests."""
    for name in carry:
        responses = responses.append_column(name, requests.column(name))
    return responses


def http_processor_config(cfg: LLMConfig):
    """The ``HttpRequestProcessorConfig`` for an OpenAI-compatible completions endpoint."""
    from ray.data.llm import HttpRequestProcessorConfig

    headers = {"Content-Type": "application/json"}
    key = os.environ.get(cfg.api_key_env)
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return HttpRequestProcessorConfig(
        url=cfg.url.rstrip("/") + "/v1/completions",
        headers=headers,
        qps=cfg.qps,
        max_retries=cfg.max_retries,
        batch_size=cfg.batch_size,
        concurrency=cfg.concurrency,
    )


def _carry(row: dict) -> dict:
    return {k: row.get(k) for k in _CARRIED}


def sampling_params(row: dict) -> dict[str, Any]:
    """vLLM ``SamplingParams`` fields for one request row."""
    if row["mode"] == SCORE:
        return {
            "max_tokens": 1,
            "temperature": 0.0,
            "logprob_token_ids": [int(t) for t in row["score_token_ids"]],
        }
    params: dict[str, Any] = {
        "max_tokens": int(row["max_tokens"]),
        "temperature": float(row["temperature"]),
        "top_p": float(row["top_p"]),
        "seed": int(row["seed"]),
    }
    if row.get("stop") is not None and len(row["stop"]):
        params["stop"] = list(row["stop"])
    if row.get("structured"):
        params["structured_outputs"] = json.loads(row["structured"])
    return params


def serve_request(row: dict, cfg: LLMConfig) -> dict:
    """A completion request for the Serve deployment, with the request's own columns carried. The
    body travels as JSON: Ray Data hands the stage its columns as numpy arrays, which the
    request's validators cannot take (``JsonCompletionRequest`` decodes it)."""
    return {
        "method": "completions",
        "dtype": "CompletionRequest",
        "request_kwargs": {"body": json.dumps(completion_payload(row, cfg))},
        **_carry(row),
    }


class JsonCompletionRequest:
    """Stands in for the deployment's request class: builds a ``CompletionRequest`` from the JSON
    body (the batch stage's own ``request_id`` and ``idx_in_batch`` are not request fields)."""

    def __new__(cls, body: str, **_batch_fields: Any):
        from ray.serve.llm.openai_api_models import CompletionRequest

        return CompletionRequest(**json.loads(body))


def completion_payload(row: dict, cfg: LLMConfig) -> dict[str, Any]:
    """An OpenAI ``/v1/completions`` body. Choice scoring asks for the top log-probabilities with
    token ids as keys (``return_tokens_as_token_ids``, a vLLM extension the local server shares)."""
    params = sampling_params(row)
    payload: dict[str, Any] = {"model": cfg.model, "prompt": row["prompt_text"]}
    if row["mode"] == SCORE:
        payload.update(
            max_tokens=1,
            temperature=0.0,
            logprobs=cfg.top_logprobs,
            return_tokens_as_token_ids=True,
            logprob_token_ids=[int(t) for t in row["score_token_ids"]],  # vLLM: exactly these tokens
        )
    else:
        payload.update({k: v for k, v in params.items() if k != "structured_outputs"})
        if "structured_outputs" in params:
            payload["structured_outputs"] = params["structured_outputs"]
    return payload


def completion_response(row: dict, body: dict) -> dict:
    """Map an OpenAI completions response ``body`` (or an error) for request ``row`` to the
    response contract. A scoring row generates one token, whatever the server counts."""
    error = row.get("__inference_error__") or (json.dumps(body["error"]) if body.get("error") else None)
    choice = (body.get("choices") or [{}])[0]
    usage = body.get("usage") or {}
    logprobs = None
    if row.get("mode") == SCORE and not error:
        top = ((choice.get("logprobs") or {}).get("top_logprobs") or [{}])[0] or {}
        # Arrow turns the per-row dicts into one struct type: keys of other rows arrive as None.
        by_id = {_token_id(k): v for k, v in top.items() if v is not None}
        logprobs = [float(by_id.get(int(t), -math.inf)) for t in row["score_token_ids"]]
    return {
        "request_key": row["request_key"],
        "generated_text": None
        if row.get("mode") == SCORE or error
        else cut_at_stop(choice.get("text") or "", row.get("stop")),
        "score_logprobs": logprobs,
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": 1 if row.get("mode") == SCORE else int(usage.get("completion_tokens") or 0),
        "latency_s": float(row.get("time_taken") or 0.0),
        "engine_error": error,
    }


def _token_id(key: str) -> int | None:
    """``token_id:123`` → 123; anything else (a server without the extension) → None."""
    if isinstance(key, str) and key.startswith("token_id:"):
        return int(key.split(":", 1)[1])
    return None


def responses_table(batch: pa.Table | dict, carry: Sequence[str] = ()) -> pa.Table:
    """Normalise an engine output batch to ``RESPONSE_SCHEMA``, then the ``carry`` columns."""
    table = batch if isinstance(batch, pa.Table) else pa.table(batch)
    if "__inference_error__" in table.column_names:  # a ray.data.llm row that failed skips postprocess
        failed = pc.if_else(
            pc.equal(table.column("__inference_error__"), ""), None, table.column("__inference_error__")
        )
        known = (
            table.column("engine_error")
            if "engine_error" in table.column_names
            else pa.nulls(table.num_rows, pa.string())
        )
        table = table.drop_columns([c for c in ("engine_error",) if c in table.column_names])
        table = table.append_column(
            "engine_error", pc.coalesce(known.cast(pa.string()), failed.cast(pa.string()))
        )
    columns = {}
    for field in RESPONSE_SCHEMA:
        if field.name in table.column_names:
            columns[field.name] = table.column(field.name).cast(field.type)
        else:
            columns[field.name] = pa.nulls(table.num_rows, field.type)
    fields = [*RESPONSE_SCHEMA, *(pa.field(name, table.schema.field(name).type) for name in carry)]
    return pa.table([*columns.values(), *(table.column(name) for name in carry)], schema=pa.schema(fields))
