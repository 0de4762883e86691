"""Configuration of the LLM layer: which backend, which model, how much parallelism.

One ``LLMConfig`` per entry point, filled from command-line flags (``add_llm_args`` /
``from_args``) or a YAML file (``--llm-config``). The same stage code runs on every backend.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

BACKENDS = ("local", "http", "vllm", "scripted")
LOCAL_MODEL = "gemma-3-270m"


@dataclass(frozen=True)
class LLMConfig:
    """Backend and engine settings. Fields that a backend does not use are ignored by it."""

    backend: str = "local"
    model: str = LOCAL_MODEL  # HF id or path (vllm), served model name (http), or the embedded model
    tokenizer: str | None = None  # HF id/path for chat templates and choice token ids; default: model
    chat_template: bool = True  # apply the tokenizer's chat template when it has one
    batch_size: int = 8
    concurrency: int = 1  # data-parallel engine replicas (vllm) / HTTP client actors (http)
    # vllm
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.90
    max_num_batched_tokens: int | None = None
    accelerator_type: str | None = None
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # passed through to vLLM as is
    # http
    url: str = "http://127.0.0.1:8000"  # server base URL; /v1/completions is appended
    api_key_env: str = "OPENAI_API_KEY"  # name of the env var holding the key (never the key)
    qps: int | None = None
    max_retries: int = 3
    top_logprobs: int = 20  # how many next-token log-probabilities the server returns for choices
    # local
    model_dir: str | None = None  # a plain transformers checkpoint; default: the converted embedded model
    max_input_tokens: int = (
        2048  # local engine: longer prompts are cut from the left side of the article text
    )
    # scripted (tests and dry runs): prompt id -> function(variables) -> answer; see pipelines.llm.scripted
    script: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # stage runner
    shard_size: int = 64  # requests per durable response shard
    ray_num_cpus: int | None = None  # logical CPUs for a local ray.init (None: Ray's default)

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if (self.backend == "scripted") != (self.script is not None):
            raise ValueError("the scripted backend needs a script, and only it takes one")
        if self.batch_size < 1 or self.shard_size < 1 or self.concurrency < 1:
            raise ValueError("batch_size, shard_size and concurrency must be positive")

    @property
    def tokenizer_source(self) -> str:
        return self.tokenizer or self.model

    def replace(self, **changes: Any) -> LLMConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_yaml(cls, path: str | Path) -> LLMConfig:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)} | ({"script"} & set(data))
        if unknown:
            raise ValueError(f"unknown LLM config keys {sorted(unknown)} in {path}")
        return cls(**data)


def add_llm_args(parser: argparse.ArgumentParser) -> None:
    """The LLM flags every pipeline entry point accepts."""
    g = parser.add_argument_group("LLM backend")
    g.add_argument("--llm-config", help="YAML file with LLMConfig fields (flags below override it)")
    g.add_argument("--backend", choices=[b for b in BACKENDS if b != "scripted"])
    g.add_argument("--model")
    g.add_argument("--tokenizer")
    g.add_argument("--url", help="OpenAI-compatible server base URL (http backend)")
    g.add_argument("--batch-size", type=int)
    g.add_argument("--concurrency", type=int)
    g.add_argument("--tensor-parallel-size", type=int)
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--shard-size", type=int)


def from_args(args: argparse.Namespace) -> LLMConfig:
    base = LLMConfig.from_yaml(args.llm_config) if args.llm_config else LLMConfig()
    overrides = {
        name: getattr(args, name)
        for name in (
            "backend",
            "model",
            "tokenizer",
            "url",
            "batch_size",
            "concurrency",
            "tensor_parallel_size",
            "max_model_len",
            "shard_size",
        )
        if getattr(args, name, None) is not None
    }
    if (
        overrides.get("backend") in ("http", "vllm")
        and "model" not in overrides
        and base.model == LOCAL_MODEL
    ):
        raise ValueError("--model is required with the http and vllm backends")
    return base.replace(**overrides)
