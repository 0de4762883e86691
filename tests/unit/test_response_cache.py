"""The request cache of a stage: which answers it serves, and that it serves them without turning
every answer it holds into Python rows."""

import time
import tracemalloc

import pyarrow as pa

from pipelines.llm import cache
from udfs.llm_rows import RESPONSE_SCHEMA


def _responses(keys: list[str], text: str = "answer", error: str | None = None) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "request_key": k,
                "generated_text": f"{text} {k}",
                "score_logprobs": None,
                "input_tokens": 3,
                "output_tokens": 2,
                "latency_s": 0.1,
                "engine_error": error,
            }
            for k in keys
        ],
        schema=RESPONSE_SCHEMA,
    )


def test_the_newest_answer_of_each_wanted_key_is_served_and_errors_never(tmp_path):
    uri = str(tmp_path / "stage")
    older = cache.new_run_id()
    cache.write_shard(uri, older, 0, _responses(["a", "b", "c"], "old"))
    time.sleep(0.002)  # run ids order by their millisecond
    newer = cache.new_run_id()
    cache.write_shard(uri, newer, 0, _responses(["a"], "new"))
    cache.write_shard(uri, newer, 1, _responses(["b"], "failed", error="engine: timeout"))
    (tmp_path / "stage" / "responses" / "shard-0000000000000-torn-00000.parquet").write_bytes(b"PAR1 torn")

    found = cache.load_responses(uri, {"a", "b", "z"}, "s")

    assert {k: r["generated_text"] for k, r in found.items()} == {"a": "new a", "b": "old b"}
    assert sorted(p.name for p in (tmp_path / "stage" / "responses").glob("*.corrupt")) == [
        "shard-0000000000000-torn-00000.parquet.corrupt"
    ]


def test_unwanted_answers_never_become_python_rows(tmp_path):
    uri = str(tmp_path / "stage")
    long_text = "x" * 2000
    cache.write_shard(uri, cache.new_run_id(), 0, _responses([f"k{i}" for i in range(20_000)], long_text))
    tracemalloc.start()
    try:
        found = cache.load_responses(uri, {"k7"}, "s")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert list(found) == ["k7"]
    # 20,000 rows of 2 KB as Python objects would be over 40 MB; Arrow's own buffers are not traced
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB of Python objects to find one answer"
