"""A batch whose prompts share an opening (``pipelines.llm.shared_prefix``): the opening is
computed once, and the embedded model's answers (constrained text, and scores) are those of the
plain padded batch. One row is shorter than the model's 512-token sliding window and one longer,
so both kinds of attention layer are assembled with left padding."""

from __future__ import annotations

import json

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


def test_a_short_opening_is_prefilled_as_usual():
    rows = [[7] * (shared_prefix.MIN_SHARED - 1) + [1, 2], [7] * (shared_prefix.MIN_SHARED - 1) + [3]]
    assert shared_prefix.prefill(None, rows, 0) is None  # decided before the model is touched


def _prompts(engine: LocalEngine) -> list[str]:
    """Two prompts opening with 300 tokens of the Daily Oracle filter's rules, then endings of
    ~10 and ~270 tokens (another passage of the rules, and a question)."""
    prompt = load_prompt("daily_oracle.filter")
    ids = engine.tokenizer(prompt.render(prompt.example).plain_text(), add_special_tokens=False)["input_ids"]
    opening, passage = engine.tokenizer.decode(ids[:300]), engine.tokenizer.decode
    return [
        opening + "\nQuestion: Will it rain?\nAnswer:",
        opening + "\n" + passage(ids[1200:1460]) + "\nQuestion: Who voted?\nAnswer:",
    ]


def _requests(prompts: list[str], mode: str, structured: str | None = None, scored=None) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"request_key": str(k), "prompt_text": text, "mode": mode, "temperature": 0.0, "top_p": 1.0}
            | {"max_tokens": 10, "seed": 0, "stop": None, "structured": structured}
            | {"score_token_ids": scored}
            for k, text in enumerate(prompts)
        ],
        schema=REQUEST_SCHEMA,
    )


@pytest.mark.llm
def test_answers_with_the_opening_computed_once_are_those_of_the_plain_batch(engine, monkeypatch):
    prompts = _prompts(engine)
    lengths = [len(engine.tokenizer(p)["input_ids"]) for p in prompts]
    window = engine.model.config.sliding_window
    assert lengths[0] < window < lengths[1]
    batches = [
        _requests(prompts, "generate", json.dumps({"regex": "[A-Z][a-z]+( [a-z]+){0,6}\\."})),
        _requests(
            prompts, "score", scored=engine.tokenizer(" Yes No", add_special_tokens=False)["input_ids"]
        ),
    ]
    made = []
    prefill = shared_prefix.prefill

    def counted(*args):
        made.append(prefill(*args))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(shared_prefix, "prefill", counted)
        shared = [engine.run(b).to_pylist() for b in batches]
    assert len(made) == 2 and all(m is not None for m in made)
    monkeypatch.setattr(shared_prefix, "MIN_SHARED", 10**9)  # the plain padded batch
    plain = [engine.run(b).to_pylist() for b in batches]
    assert [(r["generated_text"], r["output_tokens"], r["input_tokens"]) for r in shared[0]] == [
        (r["generated_text"], r["output_tokens"], r["input_tokens"]) for r in plain[0]
    ]
    assert all(r["output_tokens"] > 0 and r["engine_error"] is None for r in shared[0])
    for ours, theirs in zip(shared[1], plain[1], strict=True):
        assert ours["score_logprobs"] == pytest.approx(theirs["score_logprobs"], abs=1e-3)
        assert ours["input_tokens"] == theirs["input_tokens"]
