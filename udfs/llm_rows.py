"""The row contract of the LLM layer, as flat Arrow schemas and pure helpers.

A stage turns input rows into *requests* (what an engine receives), engines return *responses*,
and the stage joins them back into *output rows*: the input columns plus provenance (prompt id
and version, model, backend, sampling parameters), the raw text, parsed columns, ``parse_ok`` /
``parse_error``, token counts and latency. Requests are keyed by a content hash so identical
requests run once and completed ones are never recomputed.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from udfs.ids import stable_id, stable_seed

GENERATE, SCORE = "generate", "score"
OPTION_SEPARATOR = "\x1f"  # joins the options a scored token stands for (several when they share it)

DEFAULT_SAMPLING: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "stop": []}
SAMPLING_KEYS = frozenset({*DEFAULT_SAMPLING, "seed", "structured"})

REQUEST_SCHEMA = pa.schema(
    [
        pa.field("request_key", pa.string(), nullable=False),
        pa.field("prompt_text", pa.string(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),  # generate | score
        pa.field("temperature", pa.float64()),
        pa.field("top_p", pa.float64()),
        pa.field("max_tokens", pa.int32()),
        pa.field("seed", pa.int64()),
        pa.field("stop", pa.list_(pa.string())),
        pa.field("structured", pa.string()),  # JSON {"json": schema} | {"choice": [...]} | {"regex": ...}
        pa.field("score_token_ids", pa.list_(pa.int64())),  # score mode: tokens whose log-probs to return
        pa.field(
            "score_token_options", pa.list_(pa.string())
        ),  # options each token stands for ("" = variant)
        pa.field("prompt_id", pa.string()),
        pa.field("variables_json", pa.string()),  # the prompt variables; filled for the scripted backend only
    ]
)

RESPONSE_SCHEMA = pa.schema(
    [
        pa.field("request_key", pa.string(), nullable=False),
        pa.field("generated_text", pa.string()),
        pa.field("score_logprobs", pa.list_(pa.float64())),  # aligned with score_token_ids; -inf if absent
        pa.field("input_tokens", pa.int32()),
        pa.field("output_tokens", pa.int32()),
        pa.field("latency_s", pa.float64()),
        pa.field("engine_error", pa.string()),  # null on success
    ]
)

# Columns every stage adds to its input rows.
OUTPUT_FIELDS = [
    pa.field("stage", pa.string()),
    pa.field("prompt_id", pa.string()),
    pa.field("prompt_version", pa.int32()),
    pa.field("model", pa.string()),
    pa.field("backend", pa.string()),
    pa.field("request_kind", pa.string()),  # generate | choice | verbalized
    pa.field("sample_index", pa.int32()),
    pa.field("temperature", pa.float64()),
    pa.field("top_p", pa.float64()),
    pa.field("max_tokens", pa.int32()),
    pa.field("seed", pa.int64()),
    pa.field("sampling_params", pa.string()),  # the full parameters as JSON
    pa.field("request_key", pa.string()),
    pa.field("raw_text", pa.string()),  # generated text; for choice, the most probable option
    pa.field("options", pa.list_(pa.string())),  # choice
    pa.field("option_probs", pa.list_(pa.float64())),  # choice: sums to 1
    pa.field("option_mass", pa.float64()),  # choice: raw probability on the option tokens
    pa.field("prob", pa.float64()),  # verbalized probability
    pa.field("parse_ok", pa.bool_()),
    pa.field("parse_error", pa.string()),
    pa.field("not_run", pa.bool_()),  # plan mode: no answer yet (neither kept nor failed)
    pa.field("input_tokens", pa.int32()),
    pa.field("output_tokens", pa.int32()),
    pa.field("latency_s", pa.float64()),
]
OUTPUT_COLUMNS = [f.name for f in OUTPUT_FIELDS]


def cut_at_stop(text: str, stop: list[str] | None) -> str:
    """Generated text up to its first stop string (the stop string itself excluded): every
    backend returns it that way, whether or not its engine keeps the stop string."""
    cuts = [text.find(s) for s in stop or () if s and s in text]
    return text[: min(cuts)] if cuts else text


def merge_sampling(*layers: dict[str, Any] | None) -> dict[str, Any]:
    """Later layers override earlier ones; unknown keys are an error (a typo never goes unnoticed)."""
    merged = dict(DEFAULT_SAMPLING)
    for layer in layers:
        for key, value in (layer or {}).items():
            if key not in SAMPLING_KEYS:
                raise ValueError(f"unknown sampling parameter {key!r}")
            merged[key] = value
    if merged["temperature"] < 0 or not 0 < merged["top_p"] <= 1 or merged["max_tokens"] < 1:
        raise ValueError(f"invalid sampling parameters {merged}")
    return merged


def sample_seed(base_seed: int, prompt_text: str, sample_index: int) -> int:
    """Seed of one sample: stable across runs and input order, distinct per sample."""
    return stable_seed(base_seed, prompt_text, sample_index)


def request_key(
    model: str, mode: str, prompt_text: str, sampling: dict[str, Any], score_ids: list[int]
) -> str:
    """Content hash of everything that determines an engine's answer (see ``sampling_key``)."""
    return keyed(model, mode, prompt_text, sampling_key(mode, sampling), score_ids)


def sampling_key(mode: str, sampling: dict[str, Any]) -> str:
    """The sampling parameters that decide an answer, as JSON with sorted keys: none for a scoring
    request, and no seed for greedy decoding, so identical greedy prompts collapse whatever their
    sample index."""
    if mode == SCORE:
        return "{}"
    relevant = {k: v for k, v in sampling.items() if not (k == "seed" and sampling["temperature"] == 0)}
    return json.dumps(relevant, sort_keys=True)


def keyed(model: str, mode: str, prompt_text: str, sampling_json: str, score_ids: list[int]) -> str:
    """``request_key`` of sampling parameters already in ``sampling_key``'s form."""
    return stable_id(model, mode, prompt_text, sampling_json, tuple(score_ids))
