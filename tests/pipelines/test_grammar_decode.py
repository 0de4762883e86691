"""The LM head of greedy constrained decoding (``pipelines.llm.grammar_decode.AllowedHead``): it
computes only the allowed tokens' logits when a step allows few, falls back to the full head on a
near tie or a large set, and the embedded model's answers are the same with it as without it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

from pipelines.llm import grammar_decode
from pipelines.llm.grammar_decode import AllowedHead
from pipelines.llm.local_engine import LocalEngine
from udfs.daily_oracle.outputs import filter_output
from udfs.llm_rows import REQUEST_SCHEMA


class Sets:
    """A mask stand-in: each row's allowed tokens, fixed."""

    def __init__(self, *rows: list[int]):
        self.rows = [np.array(r, dtype=np.int64) for r in rows]

    def allowed(self, vocab: int) -> list[np.ndarray]:
        return self.rows


def _head(weight: list[list[float]]) -> torch.nn.Linear:
    head = torch.nn.Linear(len(weight[0]), len(weight), bias=False)
    head.weight.data = torch.tensor(weight, dtype=torch.float32)
    return head


def test_small_sets_get_their_own_logits_and_every_other_token_minus_inf():
    head = _head([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    small = AllowedHead(head, Sets([0, 1], [2, 3]))
    hidden = torch.tensor([[[3.0, 1.0]], [[2.0, 5.0]]])
    logits = small(hidden)
    assert small.small_steps == 1
    full = head(hidden)
    assert logits[0, 0].tolist() == [full[0, 0, 0], full[0, 0, 1], -torch.inf, -torch.inf]
    assert logits[1, 0].tolist() == [-torch.inf, -torch.inf, full[1, 0, 2], full[1, 0, 3]]


def test_a_near_tie_or_a_large_set_computes_the_full_head(monkeypatch):
    head = _head([[1.0, 0.0], [1.0, 1e-7], [0.0, 1.0]])
    hidden = torch.tensor([[[1.0, 1.0]]])
    tie = AllowedHead(head, Sets([0, 1]))  # leads of 1e-7 are inside the rounding bounds
    assert torch.equal(tie(hidden), head(hidden)) and tie.small_steps == 0
    monkeypatch.setattr(grammar_decode, "LIMIT", 1)
    large = AllowedHead(head, Sets([0, 2]))  # a clear lead, but more tokens than LIMIT
    assert torch.equal(large(hidden), head(hidden)) and large.small_steps == 0


def test_a_prompt_pass_over_several_positions_computes_the_full_head():
    head = _head([[1.0, 0.0], [0.0, 1.0]])
    hidden = torch.tensor([[[3.0, 1.0], [1.0, 3.0]]])
    small = AllowedHead(head, Sets([0, 1]))
    assert torch.equal(small(hidden), head(hidden)) and small.small_steps == 0


@pytest.mark.llm
def test_the_embedded_models_constrained_answers_are_the_same_with_the_small_head(
    local_model_dir, monkeypatch
):
    engine = LocalEngine(str(local_model_dir), threads=1)
    form = json.dumps(filter_output(0))  # headings and points: a few tokens allowed at each step
    prompts = ["Score the article on the seven principles.\n*Question 1*", "Rate each answer.\n*Question 1*"]
    requests = pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0, "top_p": 1.0}
            | {"max_tokens": 60, "seed": 0, "stop": None, "structured": form, "score_token_ids": None}
            for k, text in enumerate(prompts)
        ],
        schema=REQUEST_SCHEMA,
    )
    small_steps = []
    small = AllowedHead._small

    def counted(self, hidden):
        logits = small(self, hidden)
        small_steps.append(logits is not None)
        return logits

    monkeypatch.setattr(AllowedHead, "_small", counted)
    with_small = engine.run(requests).to_pylist()
    assert sum(small_steps) > len(small_steps) / 2  # most steps took the small product
    monkeypatch.setattr(grammar_decode, "LIMIT", 0)  # every step the full head
    full = engine.run(requests).to_pylist()
    assert [(r["generated_text"], r["output_tokens"]) for r in with_small] == [
        (r["generated_text"], r["output_tokens"]) for r in full
    ]
    assert all(r["generated_text"].startswith("\n## Correctness\n- Point: ") for r in full)
    assert type(engine.model.lm_head) is torch.nn.Linear  # the model's own head is back
