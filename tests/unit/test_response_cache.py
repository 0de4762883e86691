"""The request cache of a stage: which answers it serves, and that it serves them without turning
every answer it holds into Python rows."""

import time
import tracemalloc

import pyarrow as pa

from pipelines.llm import cache
from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA


def _write_shard(uri: str, run_id: str, n: int, responses: pa.Table) -> None:
    """A shard as the stage's Ray Data write names it (write uuid ``w``, task ``n``)."""
    name = cache.shard_name(run_id, "w", n).format(i=0)
    storage.write_table(responses, storage.join(cache.responses_dir(uri), name))


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
    _write_shard(uri, older, 0, _responses(["a", "b", "c"], "old"))
    time.sleep(0.002)  # run ids order by their millisecond
    newer = cache.new_run_id()
    _write_shard(uri, newer, 0, _responses(["a"], "new"))
    _write_shard(uri, newer, 1, _responses(["b"], "failed", error="engine: timeout"))
    (tmp_path / "stage" / "responses" / "shard-0000000000000-torn-00000.parquet").write_bytes(b"PAR1 torn")

    fs, _ = storage.filesystem(uri)
    shards = [storage.filesystem(f)[1] for f in cache.usable_shards(uri, "s")]
    found = cache.answers(fs, shards, pa.array(["a", "b", "z"]))

    answers = {r["request_key"]: r["generated_text"] for r in found.to_pylist()}
    assert answers == {"a": "new a", "b": "old b"}
    assert cache.answered_keys(fs, shards, pa.array(["b", "c", "z"])).to_pylist() == ["b", "c"]
    fresh = cache.answers(fs, shards, pa.array(["b"]), fresh=frozenset(shards[-1:]))  # this run's error
    assert fresh.column("engine_error").to_pylist() == ["engine: timeout"]
    assert sorted(p.name for p in (tmp_path / "stage" / "responses").glob("*.corrupt")) == [
        "shard-0000000000000-torn-00000.parquet.corrupt"
    ]


def test_unwanted_answers_never_become_python_rows(tmp_path):
    uri = str(tmp_path / "stage")
    long_text = "x" * 2000
    _write_shard(uri, cache.new_run_id(), 0, _responses([f"k{i}" for i in range(20_000)], long_text))
    tracemalloc.start()
    try:
        (shard,) = cache.usable_shards(uri, "s")
        fs, path = storage.filesystem(shard)
        found = cache.answers(fs, [path], pa.array(["k7"]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found.column("request_key").to_pylist() == ["k7"]
    # 20,000 rows of 2 KB as Python objects would be over 40 MB; Arrow's own buffers are not traced
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB of Python objects to find one answer"
