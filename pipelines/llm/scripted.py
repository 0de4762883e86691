"""A scripted engine: replays well-formed answers per prompt id, through the same Ray Data path.

The embedded model is a small base model whose answers are often unusable, so every builder is
also tested with a script, to run its structural checks on non-empty outputs. A script maps a
prompt id to a function of the prompt's variables:

- generate / verbalized prompts: return the answer text;
- choice prompts: return the chosen option, or a dict ``{option: probability}``.

A prompt id missing from the script is an engine error row, like any other engine failure.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from udfs.llm_rows import OPTION_SEPARATOR, RESPONSE_SCHEMA, SCORE

Script = Mapping[str, Callable[[dict[str, Any]], Any]]

CHOSEN_PROBABILITY = 0.9  # the chosen option's share when a script names one option


def ship_script(script: Script) -> dict[str, Callable]:
    """Make the script's functions travel to Ray workers (see ``ship_by_value``)."""
    ship_by_value(*script.values())
    return dict(script)


def ship_by_value(*fns: Callable | None) -> None:
    """Make functions travel to Ray workers by value when their module is not one of the project's
    packages (test modules are not importable there)."""
    import cloudpickle

    for fn in fns:
        module = sys.modules.get(getattr(fn, "__module__", None) or "", None)
        if module is not None and module.__name__.split(".")[0] not in PACKAGES:
            cloudpickle.register_pickle_by_value(module)


PACKAGES = ("builtins", "pipelines", "udfs", "jobs")  # importable in every Ray worker


class ScriptedEngine:
    """Answers request batches from the script (``udfs.llm_rows`` contract)."""

    def __init__(self, script: Script):
        self.script = script

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([self._answer(row) for row in batch.to_pylist()], schema=RESPONSE_SCHEMA)

    def _answer(self, row: dict[str, Any]) -> dict[str, Any]:
        out = {
            "request_key": row["request_key"],
            "generated_text": None,
            "score_logprobs": None,
            "input_tokens": max(1, len(row["prompt_text"]) // 4),
            "output_tokens": 0,
            "latency_s": 0.0,
            "engine_error": None,
        }
        fn = self.script.get(row["prompt_id"])
        if fn is None:
            return {**out, "engine_error": f"no script for prompt {row['prompt_id']}"}
        answer = fn(json.loads(row["variables_json"]))
        if row["mode"] == SCORE:
            out["score_logprobs"] = _option_logprobs(answer, row["score_token_options"])
            out["output_tokens"] = 1
        else:
            out["generated_text"] = str(answer)
            out["output_tokens"] = max(1, len(out["generated_text"]) // 4)
        return out


def _option_logprobs(answer: Any, token_options: list[str]) -> list[float]:
    """Log-probabilities for the scored tokens: each canonical token carries the probability of
    the options it stands for; surface variants get none."""
    groups = [t.split(OPTION_SEPARATOR) if t else [] for t in token_options]
    options = [o for g in groups for o in g]
    if isinstance(answer, Mapping):
        probs = {o: float(answer.get(o, 0.0)) for o in options}
    else:
        rest = (1 - CHOSEN_PROBABILITY) / max(1, len(options) - 1)
        probs = {o: CHOSEN_PROBABILITY if o == answer else rest for o in options}
    return [
        math.log(sum(probs[o] for o in g)) if g and sum(probs[o] for o in g) > 0 else -math.inf
        for g in groups
    ]
