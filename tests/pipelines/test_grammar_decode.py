"""The engine's LM heads (``pipelines.llm.grammar_decode``): the full head's order for a few rows
(``FewRowsHead``), and the head of greedy decoding (``AllowedHead``): it computes only
the candidate tokens' logits (the allowed ones when a step allows few, else those the bfloat16
screen keeps), falls back to the full head on a near tie or a large set, and the embedded model's
answers, constrained or free, are the same with it as without it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

from pipelines.llm import grammar_decode
from pipelines.llm.grammar_decode import AllowedHead, Screen
from pipelines.llm.local_engine import LocalEngine
from udfs.daily_oracle.outputs import filter_output
from udfs.llm_rows import REQUEST_SCHEMA


class Sets:
    """A mask stand-in: each row's allowed tokens, fixed."""

    def __init__(self, *rows: list[int]):
        self.rows = [np.array(r, dtype=np.int64) for r in rows]

    def allowed(self, vocab: int) -> list[np.ndarray]:
        return self.rows

    def filled(self) -> bool:
        return True


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


@pytest.mark.parametrize("rows", [1, 2, 5, 8, 9, 16])
def test_the_full_head_takes_the_other_order_for_a_few_rows_only(rows):
    """``FewRowsHead``: the linear product in either order (the same logits up to rounding, the
    same shape), ``weight @ hiddenᵀ`` exactly for 2 to 8 rows and ``nn.Linear``'s otherwise."""
    generator = torch.Generator().manual_seed(rows)
    linear = torch.nn.Linear(64, 1000, bias=False)
    linear.weight.data = torch.randn(1000, 64, generator=generator)
    head = grammar_decode.FewRowsHead(linear)
    hidden = torch.randn(rows, 1, 64, generator=generator)
    logits = head(hidden)
    assert logits.shape == (rows, 1, 1000) and torch.allclose(logits, linear(hidden), rtol=1e-5, atol=1e-4)
    assert logits.is_contiguous()  # xgrammar masks the logits in place, as laid out in memory
    other = (linear.weight @ hidden[:, 0].T).T[:, None]
    assert torch.equal(logits, other if 2 <= rows <= 8 else linear(hidden))
    assert head.weight is linear.weight  # the model's weight (tied to its embeddings), not a copy


def test_a_head_with_a_bias_is_refused():
    with pytest.raises(ValueError, match="bias-free"):
        grammar_decode.FewRowsHead(torch.nn.Linear(4, 8))


def test_a_prompt_pass_over_several_positions_computes_the_full_head():
    head = _head([[1.0, 0.0], [0.0, 1.0]])
    hidden = torch.tensor([[[3.0, 1.0], [1.0, 3.0]]])
    small = AllowedHead(head, Sets([0, 1]))
    assert torch.equal(small(hidden), head(hidden)) and small.small_steps == 0


def test_the_screen_keeps_the_full_heads_choice_where_bfloat16_rounding_reverses_the_order():
    # float32: token 0 scores 100.2 - 99 = 1.2, token 1 1.1; in bfloat16, 100.2 is 100, so token 0
    # scores 1.0 and token 1 leads. Both must stay candidates, and the float32 products choose 0.
    head = _head([[100.2, -99.0], [1.1, 0.0], [-5.0, 0.0]])
    hidden = torch.tensor([[[1.0, 1.0]]])
    z = torch.nn.functional.linear(hidden[:, 0].bfloat16(), head.weight.bfloat16())
    assert int(torch.argmax(z)) == 1 and int(torch.argmax(head(hidden))) == 0
    screen = Screen(head.weight)
    assert screen.candidates(hidden[:, 0], None)[0].tolist() == [0, 1]  # -5.0 is ruled out
    assert screen.candidates(hidden[:, 0], [np.array([1, 2])])[0].tolist() == [1]  # the grammar's
    small = AllowedHead(head, None, screen)
    logits = small(hidden)
    assert small.small_steps == 1 and int(torch.argmax(logits)) == 0


def test_screened_rows_choose_the_full_heads_token_and_a_tie_computes_the_full_head():
    weight = torch.randn(3000, 64, generator=torch.Generator().manual_seed(3))
    head = _head(weight.tolist())
    hidden = torch.randn(4, 1, 64, generator=torch.Generator().manual_seed(4)) * 8
    small = AllowedHead(head, None, Screen(head.weight))
    logits = small(hidden)
    assert small.small_steps == 1
    assert torch.equal(torch.argmax(logits, -1), torch.argmax(head(hidden), -1))
    assert int(torch.isfinite(logits).sum()) < 4 * 100  # a few candidates a row, not the vocabulary
    twins = _head([*weight.tolist(), weight[int(torch.argmax(head(hidden)[0, 0]))].tolist()])
    tie = AllowedHead(twins, None, Screen(twins.weight))
    assert torch.equal(tie(hidden), twins(hidden)) and tie.small_steps == 0


def small_and_full(
    engine: LocalEngine, monkeypatch, prompts: list[str], max_tokens: int, structured: str | None
) -> list[dict]:
    """Greedy answers to ``prompts`` with the small head, then with the full head at every step
    (LIMIT 0): most steps took the small product, the answers are the same, and the model's own
    head is back afterwards. Returns the full head's rows."""
    requests = pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0, "top_p": 1.0}
            | {"max_tokens": max_tokens, "seed": 0, "stop": None, "structured": structured}
            | {"score_token_ids": None}
            for k, text in enumerate(prompts)
        ],
        schema=REQUEST_SCHEMA,
    )
    steps = []
    small = AllowedHead._small

    def counted(self, hidden):
        logits = small(self, hidden)
        steps.append(logits is not None)
        return logits

    with monkeypatch.context() as patch:
        patch.setattr(AllowedHead, "_small", counted)
        with_small = engine.run(requests).to_pylist()
        assert sum(steps) > len(steps) / 2  # most steps took the small product
        patch.setattr(grammar_decode, "LIMIT", 0)  # every step the full head
        full = engine.run(requests).to_pylist()
    assert [(r["generated_text"], r["output_tokens"]) for r in with_small] == [
        (r["generated_text"], r["output_tokens"]) for r in full
    ]
    assert type(engine.model.lm_head) is grammar_decode.FewRowsHead  # the engine's own head is back
    return full


@pytest.mark.llm
def test_the_embedded_models_free_text_is_the_same_with_the_screened_head(engine, monkeypatch):
    if not Screen.available():
        pytest.skip("this CPU has no bfloat16 products: the engine decodes with the full head")
    prompts = [
        "The river port reported record cargo volumes this week, and officials said",
        "Question: Will the central bank raise rates before December? Answer:",
        "Write a headline about a flood in the valley:",
    ]
    full = small_and_full(engine, monkeypatch, prompts, 40, None)
    assert all(r["output_tokens"] > 10 for r in full)


@pytest.mark.llm
def test_the_embedded_models_constrained_answers_are_the_same_with_the_small_head(engine, monkeypatch):
    form = json.dumps(filter_output(0))  # headings and points: a few tokens allowed at each step
    prompts = ["Score the article on the seven principles.\n*Question 1*", "Rate each answer.\n*Question 1*"]
    full = small_and_full(engine, monkeypatch, prompts, 60, form)
    assert all(r["generated_text"].startswith("\n## Correctness\n- Point: ") for r in full)


@pytest.mark.llm
def test_loading_the_engine_draws_no_progress_bar_in_a_log(local_model_dir, capfd):
    """Where stderr is no terminal (a job's log, a Ray worker's), loading the model draws no
    transformers progress bar: in a log, each redraw is a line."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_progress_bar()
    LocalEngine(str(local_model_dir), threads=1)
    assert "Loading weights" not in capfd.readouterr().err
    assert not hf_logging.is_progress_bar_enabled()
