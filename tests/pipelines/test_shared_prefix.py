"""A batch whose prompts share an opening (``pipelines.llm.shared_prefix``): the opening is
computed once, and the embedded model's answers (constrained text, and scores) are those of the
plain padded batch. The generated rows straddle the model's 512-token sliding window (one
shorter, one longer) and the scored rows share an opening longer than the window, so both kinds
of attention layer are assembled with left padding, from an opening inside and past the window."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from pipelines.llm import shared_prefix
from pipelines.llm.local_engine import LocalEngine
from udfs.llm_rows import REQUEST_SCHEMA
from udfs.prompts import load_prompt


@pytest.mark.parametrize(
    ("rows", "shared"),
    [
        ([], 0),
        ([[1, 2, 3]], 0),  # one row shares nothing with itself
        ([[1, 2, 3], [1, 2, 3]], 2),  # each row keeps its last token
        ([[1, 2, 3, 4], [1, 2, 9, 4]], 2),
        ([[1, 2], [1, 2, 3, 4]], 1),  # bounded by the shortest row
        ([[5, 2], [1, 2]], 0),
    ],
)
def test_the_shared_length_leaves_every_row_its_last_token(rows, shared):
    assert shared_prefix.shared_length(rows) == shared


def test_a_short_opening_is_a_plain_left_padded_batch():
    opening = [7] * (shared_prefix.MIN_SHARED - 1)
    batch = shared_prefix.inputs(None, [[*opening, 1, 2], [*opening, 3]], 0)  # decided without a model
    assert set(batch) == {"input_ids", "attention_mask"}
    assert batch["input_ids"][:, -2:].tolist() == [[1, 2], [7, 3]]
    assert batch["input_ids"][1, 0] == 0 and batch["attention_mask"].sum(dim=1).tolist() == [65, 64]


def _prompts(engine: LocalEngine, opening: int, endings: list[tuple[int, int]]) -> list[str]:
    """Prompts opening with ``opening`` tokens of the Daily Oracle filter's rules, each then
    another passage of the rules (token ``start`` to ``end``) and a question."""
    prompt = load_prompt("daily_oracle.filter")
    ids = engine.tokenizer(prompt.render(prompt.example).plain_text(), add_special_tokens=False)["input_ids"]
    text = engine.tokenizer.decode
    return [f"{text(ids[:opening])}\n{text(ids[a:b])}\nQuestion: Will it hold?\nAnswer:" for a, b in endings]


def _requests(prompts: list[str], mode: str, **fields: Any) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": mode, "temperature": 0.0, "top_p": 1.0}
            | {"max_tokens": 10, "seed": 0, "stop": None, "structured": None, "score_token_ids": None}
            | fields
            for k, text in enumerate(prompts)
        ],
        schema=REQUEST_SCHEMA,
    )


@pytest.mark.llm
def test_answers_with_the_opening_computed_once_are_those_of_the_plain_batch(engine, monkeypatch):
    window = engine.model.config.sliding_window
    straddling = _prompts(engine, 300, [(1300, 1300), (1200, 1460)])
    past = _prompts(engine, 560, [(1300, 1300), (1200, 1240)])
    lengths = [[len(engine.tokenizer(p)["input_ids"]) for p in prompts] for prompts in (straddling, past)]
    assert lengths[0][0] < window < lengths[0][1] and window < 560 < min(lengths[1])
    form = json.dumps({"regex": "[A-Z][a-z]+( [a-z]+){0,6}\\."})
    yes_no = engine.tokenizer(" Yes No", add_special_tokens=False)["input_ids"]
    batches = [
        _requests(straddling, "generate", structured=form),
        _requests(past, "score", score_token_ids=yes_no),
    ]
    made = []
    inputs = shared_prefix.inputs

    def kept(*args: Any) -> dict[str, Any]:
        made.append(inputs(*args))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(shared_prefix, "inputs", kept)
        shared = [engine.run(b).to_pylist() for b in batches]
    # each batch went on from its assembled cache, which grew past the prompts
    grown = [m["past_key_values"].get_seq_length() - max(n) for m, n in zip(made, lengths, strict=True)]
    assert grown[0] >= 0 and grown[1] == 0  # -1 for a cache left unused: it holds all but the last
    monkeypatch.setattr(shared_prefix, "MIN_SHARED", 10**9)  # the plain padded batch
    plain = [engine.run(b).to_pylist() for b in batches]
    assert [(r["generated_text"], r["output_tokens"], r["input_tokens"]) for r in shared[0]] == [
        (r["generated_text"], r["output_tokens"], r["input_tokens"]) for r in plain[0]
    ]
    assert all(r["output_tokens"] > 0 and r["engine_error"] is None for r in shared[0])
    for ours, theirs in zip(shared[1], plain[1], strict=True):
        assert ours["score_logprobs"] == pytest.approx(theirs["score_logprobs"], abs=1e-3)
        assert ours["input_tokens"] == theirs["input_tokens"]
