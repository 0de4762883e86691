"""The grammar mask of greedy decoding (``grammar_decode.GrammarMask``): a row in a state that
allows many tokens offers its best token to the grammar before filling its mask, and the tokens
chosen are those a mask filled at every step gives, on a toy vocabulary (every path: the best
token taken, refused, a row fed padding after a stop string, a row that ends) and on the
embedded model's answers to a free-text form."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest
import torch
import xgrammar as xgr

from pipelines.llm import grammar_decode
from pipelines.llm.grammar_decode import GrammarMask
from udfs.llm_rows import REQUEST_SCHEMA

VOCAB = ["<eos>", "a", "b", "c", "x", "ab", "ba", ""]  # 0 ends, 7 is the padding (special)
PAD = 7
# The headline's bound: the compiled form holds a grammar state per character of it, ~0.06
# CPU-seconds each for the embedded model's 262k tokens (200 took 12 s to compile)
HEADLINE = 40


def _decode(mask: GrammarMask, scores: torch.Tensor, padded: dict[int, int]) -> list[list[int]]:
    """Greedy choices over ``scores`` (steps × rows × vocab) as generate makes them: the mask's
    hook before each step, its processor, then argmax; row r is fed padding from step
    ``padded[r]`` on (stopped by a stop string)."""
    rows = scores.shape[1]
    ids = torch.full((rows, 1), PAD)
    chosen = []
    for step, step_scores in enumerate(scores):
        mask.advance(None, (), {"input_ids": ids})
        best = mask(ids, step_scores.clone()).argmax(dim=1)
        for row, start in padded.items():
            if step >= start:
                best[row] = PAD
        ids = torch.cat([ids, best[:, None]], dim=1)
        chosen.append(best.tolist())
    return chosen


@pytest.mark.parametrize("seed", range(4))
def test_checking_the_best_token_first_chooses_what_the_full_mask_chooses(monkeypatch, seed):
    """Rows repeat until the bound leaves only "c" (the best token refused: the fill decides), then
    end; a row fed padding keeps the state it had when it stopped."""
    monkeypatch.setattr(grammar_decode, "LIMIT", 2)  # a toy state allowing 3 or more tokens is free text
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[0])
    compiled = xgr.GrammarCompiler(info).compile_regex(r"(a|b|ab|ba){1,5}c")
    scores = torch.randn((12, 4, len(VOCAB)), generator=torch.Generator().manual_seed(seed))
    scores[:, :, 1] += 2.0  # "a" is mostly the best token: taken unfilled until the bound refuses it
    padded = {2: 2}  # row 2 stops at step 2 and is fed padding afterwards
    full = GrammarMask(compiled, 4, [0], greedy=False)
    lazy = GrammarMask(compiled, 4, [0], greedy=True)
    assert _decode(lazy, scores, padded) == _decode(full, scores, padded)
    assert lazy.checked > 0 and full.checked == 0
    states = []
    for mask in (full, lazy):  # every matcher where the full mask's is, the stopped row's included
        bitmask = xgr.allocate_token_bitmask(4, len(VOCAB))
        for i, matcher in enumerate(mask.matchers):
            if not matcher.is_terminated():
                matcher.fill_next_token_bitmask(bitmask, i)
        states.append((bitmask.tolist(), [m.is_terminated() for m in mask.matchers]))
    assert states[0] == states[1]
    assert states[0][1] == [True, True, False, True]


def test_a_refused_best_token_fills_the_mask_and_a_taken_one_is_fed_once(monkeypatch):
    monkeypatch.setattr(grammar_decode, "LIMIT", 2)
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[0])
    mask = GrammarMask(xgr.GrammarCompiler(info).compile_regex(r"(a|b|ab|ba){1,9}c"), 1, [0], greedy=True)
    mask.advance(None, (), {"input_ids": torch.tensor([[PAD]])})
    assert mask.lazy == [True] and not mask.filled()  # a, b, ab, ba: more than LIMIT
    out = mask(torch.tensor([[PAD]]), torch.tensor([[0.0, 2.0, 0.0, 0.0, 5.0, 1.0, 0.0, 0.0]]))
    assert int(out.argmax()) == 1 and out[0, 4] == -torch.inf  # "x" refused: the mask decides
    assert mask.checked == 0 and mask.chosen == [None]
    mask.advance(None, (), {"input_ids": torch.tensor([[PAD, 1]])})
    out = mask(torch.tensor([[PAD, 1]]), torch.tensor([[0.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0, 0.0]]))
    assert mask.chosen == [3] and mask.checked == 1  # "c" taken unfilled: the only token left
    assert out[0].isfinite().tolist() == [token == 3 for token in range(len(VOCAB))]
    mask.advance(None, (), {"input_ids": torch.tensor([[PAD, 1, 3]])})  # not fed "c" a second time
    assert mask.matchers[0].accept_token(0) and mask.matchers[0].is_terminated()


def test_a_state_allowing_few_tokens_is_filled_ahead_whatever_the_spare_bits(monkeypatch):
    """The toy vocabulary fills 8 of the bitmask word's 32 bits; xgrammar sets the other 24 when
    it writes a mask as "all but the refused tokens"."""
    monkeypatch.setattr(grammar_decode, "LIMIT", 3)
    info = xgr.TokenizerInfo(VOCAB, stop_token_ids=[0])
    mask = GrammarMask(xgr.GrammarCompiler(info).compile_regex(r"[^x]"), 1, [0], greedy=True)
    mask.advance(None, (), {"input_ids": torch.tensor([[PAD]])})
    assert mask.bitmask[0, 0] >> 8 == -1  # the spare bits are set
    assert mask.allowed(len(VOCAB))[0].tolist() == [1, 2, 3] and mask.lazy == [False] and mask.filled()


@pytest.mark.llm
def test_the_embedded_models_free_text_answers_are_those_of_the_mask_filled_every_step(engine, monkeypatch):
    """Greedy answers to a form of free-text fields: most row-steps skip the fill, and the text is
    the same when every step fills the mask."""
    form = json.dumps(
        {
            "json": {
                "type": "object",
                "properties": {
                    "headline": {"type": "string", "maxLength": HEADLINE},
                    "summary": {"type": "string"},
                },
                "required": ["headline", "summary"],
            }
        }
    )
    prompts = [
        "Write a news item about a flood in the valley as JSON:",
        "A report on the port's cargo, as JSON:",
    ]
    requests = pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": "generate", "temperature": 0.0, "top_p": 1.0}
            | {"max_tokens": 48, "seed": 0, "stop": None, "structured": form, "score_token_ids": None}
            for k, text in enumerate(prompts)
        ],
        schema=REQUEST_SCHEMA,
    )
    masks: list[GrammarMask] = []
    made = GrammarMask.__init__

    def recorded(self, *args, **kwargs):
        made(self, *args, **kwargs)
        masks.append(self)

    fill = GrammarMask._fill

    def every_step(self, i):
        fill(self, i)
        self.lazy[i] = False

    with monkeypatch.context() as patch:
        patch.setattr(GrammarMask, "__init__", recorded)
        checked = engine.run(requests).to_pylist()
        patch.setattr(GrammarMask, "_fill", every_step)
        filled = engine.run(requests).to_pylist()
    assert [(r["generated_text"], r["output_tokens"]) for r in checked] == [
        (r["generated_text"], r["output_tokens"]) for r in filled
    ]
    assert all(r["output_tokens"] > 20 for r in checked)
    quoted = [re.match(r'\{"headline": ("(?:[^"\\]|\\.)*")', r["generated_text"])[1] for r in checked]
    assert max(len(json.loads(q)) for q in quoted) == HEADLINE  # a headline ran to the form's bound
    assert masks[0].checked > masks[0].steps  # most of the two rows' steps skipped the fill
    assert masks[1].checked == 0
