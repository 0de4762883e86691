"""Token counts of the local engine agree with vLLM's: a row counts the tokens it generated
(its end-of-sequence token included), never the padding its batch-mates add, and a scoring row
generates one token."""

import pyarrow as pa
import pytest

from pipelines.llm.backends import local_engine_actors
from pipelines.llm.config import LLMConfig
from udfs.llm_rows import REQUEST_SCHEMA

pytestmark = pytest.mark.llm


def _request(key: str, text: str, stop: list[str], mode: str = "generate", score_ids=()) -> dict:
    return {
        "request_key": key,
        "prompt_text": text,
        "mode": mode,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 24,
        "seed": 0,
        "stop": stop,
        "structured": None,
        "score_token_ids": list(score_ids),
        "score_token_options": [],
        "prompt_id": "p",
        "variables_json": None,
    }


def _answer(requests: list[dict]) -> dict[str, dict]:
    import ray

    engine = local_engine_actors(LLMConfig())[0]
    table = ray.get(engine.run.remote(pa.Table.from_pylist(requests, schema=REQUEST_SCHEMA)))
    return {r["request_key"]: r for r in table.to_pylist()}


def test_a_rows_token_count_does_not_depend_on_its_batch_mates(ray_local):
    short = _request("short", "Q: What is the capital of France?\nA:", ["\n"])
    long = _request("long", "Count from one to fifty in words: one, two, three,", ["\n"])
    alone = _answer([short])["short"]
    batched = _answer([short, long])
    assert alone["generated_text"] == batched["short"]["generated_text"]
    assert batched["long"]["output_tokens"] == 24  # ran to the cap while the short row waited
    assert alone["output_tokens"] < 24
    assert batched["short"]["output_tokens"] == alone["output_tokens"]


def test_a_scoring_row_generates_one_token(ray_local):
    row = _answer([_request("score", "Is Paris in France? Answer:", [], mode="score", score_ids=[7, 8])])[
        "score"
    ]
    assert row["engine_error"] is None and len(row["score_logprobs"]) == 2
    assert row["output_tokens"] == 1
