"""The request cache of a stage: which shards it uses, which answer it serves for a key, which
shards it reads for them, and which copy of a request a block keeps."""

import numpy as np
import pyarrow as pa
import pytest

from pipelines.llm import cache
from pipelines.llm.partition import _first_copies
from pipelines.llm.render import ROW, SAMPLE
from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA


def _write_shard(uri: str, run_id: str, n: int, responses: pa.Table) -> None:
    """A shard as the stage's collector names it (writer ``w``, its ``n``-th shard)."""
    name = cache.shard_name(run_id, "w", n)
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


def _index(uri: str) -> cache.CacheIndex:
    shards = cache.usable_shards(uri, "s")
    return cache.build_index([storage.filesystem(f)[1] for f in shards], storage.filesystem(shards[0])[0])


def test_unusable_shards_are_set_aside(tmp_path):
    uri = str(tmp_path / "stage")
    _write_shard(uri, cache.new_run_id(), 0, _responses(["a"]))
    (tmp_path / "stage" / "responses" / "shard-0000000000000-torn-00000.parquet").write_bytes(b"PAR1 torn")
    assert [f.rsplit("/", 1)[-1] for f in cache.usable_shards(uri, "s")] == [
        cache.shards(uri)[-1].rsplit("/", 1)[-1]
    ]
    assert sorted(p.name for p in (tmp_path / "stage" / "responses").glob("*.corrupt")) == [
        "shard-0000000000000-torn-00000.parquet.corrupt"
    ]


def test_the_index_serves_the_newest_answer_and_never_an_engine_error(tmp_path):
    uri = str(tmp_path / "stage")
    runs = [f"{1000 + n:013d}-run{n}" for n in range(3)]  # oldest first, by the time in the name
    _write_shard(uri, runs[0], 0, _responses(["a", "b", "c"], "old"))
    _write_shard(uri, runs[1], 0, _responses(["a"], "new"))
    _write_shard(uri, runs[2], 0, _responses(["b", "d"], "failed", error="engine: timeout"))
    index = _index(uri)
    got = index.answers(pa.array(["a", "b", "d", "z"]))
    assert got.schema == RESPONSE_SCHEMA
    assert dict(zip(got["request_key"].to_pylist(), got["generated_text"].to_pylist(), strict=True)) == {
        "a": "new a",
        "b": "old b",  # the newer engine error is not served
    }  # "d": only an engine error, "z": never asked: both are computed again
    assert index.answers(pa.array([], pa.string())).num_rows == 0


def test_the_index_reads_only_the_shards_holding_the_keys_asked(tmp_path):
    uri = str(tmp_path / "stage")
    for n, keys in enumerate([["a", "b"], ["c"], ["d"]]):
        _write_shard(uri, f"{1000 + n:013d}-run{n}", 0, _responses(keys))
    index = _index(uri)
    storage.delete(cache.shards(uri)[1])  # the shard answering "c" is gone after the index was built
    assert index.answers(pa.array(["d", "a"]))["request_key"].to_pylist() == ["a", "d"]
    with pytest.raises(FileNotFoundError):
        index.answers(pa.array(["c"]))


def test_a_block_keeps_the_first_copy_of_each_key_by_row_then_sample():
    keys = ["b", "a", "b", "c", "b", "a"]
    requests = pa.table({"request_key": keys})
    units = pa.table(
        {ROW: pa.array([4, 1, 2, 3, 2, 1], pa.int64()), SAMPLE: pa.array([0, 1, 1, 0, 0, 0], pa.int32())}
    )
    first = _first_copies(requests, units, np.arange(6))
    assert [keys[i] for i in first] == ["a", "b", "c"]
    assert [(units[ROW][i].as_py(), units[SAMPLE][i].as_py()) for i in first] == [(1, 0), (2, 0), (3, 0)]
