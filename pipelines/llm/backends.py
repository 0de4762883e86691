"""The three engines behind one contract: a Ray Dataset of requests in, a Dataset of responses out.

- ``vllm``: ``ray.data.llm.build_processor(vLLMEngineProcessorConfig(...))`` — production GPUs.
- ``http``: ``HttpRequestProcessorConfig`` against any OpenAI-compatible ``/v1/completions``
  server (``vllm serve`` in production, ``python -m pipelines.llm.serve_local`` on a laptop).
- ``local``: ``LocalEngine`` (transformers, CPU) as a Ray Data actor stage.
- ``scripted``: ``ScriptedEngine`` replays well-formed answers per prompt id (builder tests).

Prompts arrive fully rendered (chat template already applied by the stage runner), so every
backend sees byte-identical text and the vLLM chat-template stage stays off.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pyarrow as pa

from pipelines.llm.config import LLMConfig
from udfs.llm_rows import GENERATE, RESPONSE_SCHEMA, SCORE, cut_at_stop

_CARRIED = ("request_key", "mode", "score_token_ids", "stop")


def apply_backend(ds, cfg: LLMConfig):
    """Run a Ray Dataset of requests through the configured engine; returns responses."""
    import ray.data

    if cfg.backend == "local":
        return ds.map_batches(
            _LocalEngineClient,
            fn_constructor_kwargs={"engines": local_engine_actors(cfg)},
            batch_size=cfg.batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=cfg.concurrency),
            num_cpus=0,
        )
    if cfg.backend == "scripted":
        from pipelines.llm.scripted import ScriptedEngine, ship_script

        return ds.map_batches(
            ScriptedEngine,
            fn_constructor_kwargs={"script": ship_script(cfg.script)},
            batch_size=cfg.batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=1),
            num_cpus=0,
        )
    from ray.data.llm import build_processor

    if cfg.backend == "vllm":
        from pipelines.llm.placement import wait_for_engines

        config = vllm_processor_config(cfg)
        wait_for_engines(config, cfg.schedule_timeout_s)  # an error instead of Ray's silent stall
        processor = build_processor(config, preprocess=vllm_request, postprocess=vllm_response)
    else:
        processor = build_processor(
            http_processor_config(cfg),
            preprocess=lambda row: {"payload": completion_payload(row, cfg)},
            postprocess=lambda row: http_response(row, cfg.top_logprobs),
        )
    return processor(ds)


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


class _LocalEngineClient:
    """The Ray Data stage in front of a local engine actor."""

    def __init__(self, engines: list[Any]):
        self.engine = engines[os.getpid() % len(engines)]

    def __call__(self, batch: pa.Table) -> pa.Table:
        import ray

        return ray.get(self.engine.run.remote(batch))


def vllm_processor_config(cfg: LLMConfig):
    """The ``vLLMEngineProcessorConfig`` for ``cfg`` (Ray 2.60 API: nested stage configs)."""
    from ray.data.llm import vLLMEngineProcessorConfig

    engine_kwargs: dict[str, Any] = {
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "pipeline_parallel_size": cfg.pipeline_parallel_size,
        "max_model_len": cfg.max_model_len,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        **({"max_num_batched_tokens": cfg.max_num_batched_tokens} if cfg.max_num_batched_tokens else {}),
        **cfg.engine_kwargs,
    }
    return vLLMEngineProcessorConfig(
        model_source=cfg.model,
        engine_kwargs=engine_kwargs,
        batch_size=cfg.batch_size,
        concurrency=(cfg.concurrency, cfg.concurrency),
        accelerator_type=cfg.accelerator_type,
        placement_group_config=cfg.placement_group_config,
        should_continue_on_error=True,
        chat_template_stage=False,
        tokenize_stage=True,
        detokenize_stage=True,
    )


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


def vllm_request(row: dict) -> dict:
    return {"prompt": row["prompt_text"], "sampling_params": sampling_params(row), **_carry(row)}


def vllm_response(row: dict) -> dict:
    """Reduce vLLM's output row to the response contract (token-id-keyed dicts cannot go to Arrow)."""
    logprobs = None
    if row.get("mode") == SCORE:
        first = (row.get("logprobs") or [{}])[0] or {}
        logprobs = [_logprob_value(first.get(int(t), first.get(str(t)))) for t in row["score_token_ids"]]
    return {
        "request_key": row["request_key"],
        "generated_text": cut_at_stop(row["generated_text"], row.get("stop"))
        if row.get("mode") == GENERATE and row.get("generated_text") is not None
        else None,
        "score_logprobs": logprobs,
        "input_tokens": int(row.get("num_input_tokens") or 0),
        # a scoring row generates one token (max_tokens=1) whatever Ray's count says: the same
        # figure as the local engine's
        "output_tokens": 1 if row.get("mode") == SCORE else int(row.get("num_generated_tokens") or 0),
        "latency_s": float(row.get("time_taken_llm") or 0.0),
        "engine_error": row.get("__inference_error__") or None,
    }


def _logprob_value(entry: Any) -> float:
    if entry is None:
        return -math.inf
    if isinstance(entry, dict):
        return float(entry.get("logprob", -math.inf))
    return float(getattr(entry, "logprob", entry))


def completion_payload(row: dict, cfg: LLMConfig) -> dict[str, Any]:
    """An OpenAI ``/v1/completions`` body. Choice scoring asks for the top log-probabilities with
    token ids as keys (``return_tokens_as_token_ids``, a vLLM extension the local server shares)."""
    params = sampling_params(row)
    payload: dict[str, Any] = {"model": cfg.model, "prompt": row["prompt_text"]}
    if row["mode"] == SCORE:
        payload.update(
            max_tokens=1, temperature=0.0, logprobs=cfg.top_logprobs, return_tokens_as_token_ids=True
        )
    else:
        payload.update({k: v for k, v in params.items() if k != "structured_outputs"})
        if "structured_outputs" in params:
            payload["structured_outputs"] = params["structured_outputs"]
    return payload


def http_response(row: dict, top_logprobs: int) -> dict:
    """Map an OpenAI completions response (or an error) to the response contract."""
    body = row.get("http_response") or {}
    error = row.get("__inference_error__") or (json.dumps(body["error"]) if "error" in body else None)
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
        "generated_text": None if row.get("mode") == SCORE else choice.get("text"),
        "score_logprobs": logprobs,
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "latency_s": float(row.get("time_taken") or 0.0),
        "engine_error": error,
    }


def _token_id(key: str) -> int | None:
    """``token_id:123`` → 123; anything else (a server without the extension) → None."""
    if isinstance(key, str) and key.startswith("token_id:"):
        return int(key.split(":", 1)[1])
    return None


def responses_table(batch: pa.Table | dict) -> pa.Table:
    """Normalise an engine output batch to exactly ``RESPONSE_SCHEMA``."""
    table = batch if isinstance(batch, pa.Table) else pa.table(batch)
    columns = {}
    for field in RESPONSE_SCHEMA:
        if field.name in table.column_names:
            columns[field.name] = table.column(field.name).cast(field.type)
        else:
            columns[field.name] = pa.nulls(table.num_rows, field.type)
    return pa.table(columns, schema=RESPONSE_SCHEMA)
