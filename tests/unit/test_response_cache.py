"""The request cache of a stage: which shards it uses, which requests it counts as answered, and
which answer each (unit, request) pair gets."""

import pyarrow as pa

from pipelines.llm import cache
from pipelines.llm.render import COPIES, ROW, SAMPLE
from udfs import storage
from udfs.llm_rows import REQUEST_SCHEMA, RESPONSE_SCHEMA


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


def _shard_rows(responses: pa.Table, age: int, fresh: bool) -> pa.Table:
    """Rows of one shard as ``read_files`` gives them to ``served``."""
    n = responses.num_rows
    return responses.append_column(cache.AGE, pa.repeat(age, n)).append_column(
        cache.FRESH, pa.repeat(fresh, n)
    )


def _requests(keys: list[str], rows: list[int]) -> pa.Table:
    """Rendered requests (the request schema and each one's input position)."""
    n = len(keys)
    own = {
        "request_key": pa.array(keys),
        "prompt_text": pa.array([f"p {k}" for k in keys]),
        "mode": pa.repeat("generate", n),
    }
    table = pa.table([own.get(f.name, pa.nulls(n, f.type)) for f in REQUEST_SCHEMA], schema=REQUEST_SCHEMA)
    return table.append_column(ROW, pa.array(rows, pa.int64()))


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


def test_requests_collapse_per_key_and_the_cached_ones_are_marked():
    requests = _requests(["b", "a", "b", "c", "b"], [4, 1, 2, 3, 9])
    markers = cache.answered_markers(
        pa.concat_tables([_responses(["b", "z"]), _responses(["c"], error="engine: timeout")])
    )
    unique = cache.unique_requests(pa.concat_tables([requests, markers]))
    assert unique.column("request_key").to_pylist() == ["a", "b", "c"]  # "z": answered, not asked
    assert unique.column(COPIES).to_pylist() == [1, 3, 1]
    assert unique.column(cache.CACHED).to_pylist() == [0, 1, 0]  # an engine error never counts
    assert unique.column("prompt_text").to_pylist() == ["p a", "p b", "p c"]
    assert ROW not in unique.column_names
    empty = cache.unique_requests(markers)
    assert empty.num_rows == 0 and empty.column_names == unique.column_names


def test_each_pair_takes_the_newest_answer_and_old_engine_errors_never():
    old = _shard_rows(_responses(["a", "b", "c"], "old"), age=0, fresh=False)
    new = _shard_rows(_responses(["a"], "new"), age=1, fresh=False)
    failed = _shard_rows(_responses(["b", "d"], "failed", error="engine: timeout"), age=2, fresh=False)
    this_run = _shard_rows(_responses(["e"], "failed", error="engine: oom"), age=3, fresh=True)
    answers = pa.concat_tables([cache.served(t) for t in (old, new, failed, this_run)])
    pairs = pa.table(
        {ROW: [5, 0, 0, 7, 2, 3], SAMPLE: [0, 0, 1, 0, 0, 0], "request_key": ["a", "b", "a", "d", "e", ""]}
    )
    pairs = pa.table(
        [
            pairs.column(f.name) if f.name in pairs.column_names else pa.nulls(6, f.type)
            for f in cache.JOIN_SCHEMA
        ],
        schema=cache.JOIN_SCHEMA,
    )
    out = cache.attach_answers(pa.concat_tables([answers, pairs]))
    assert out.schema == cache.JOIN_SCHEMA
    got = {(r[ROW], r[SAMPLE]): (r["generated_text"], r["engine_error"]) for r in out.to_pylist()}
    assert got == {
        (5, 0): ("new a", None),
        (0, 0): ("old b", None),  # the newer engine error is not served
        (0, 1): ("new a", None),
        (7, 0): (None, None),  # only an old engine error: no answer, computed again
        (2, 0): ("failed e", "engine: oom"),  # this run's error is the row's outcome
        (3, 0): (None, None),
    }
    assert out.column(cache.AGE).to_pylist() == [1, 0, 1, None, 3, None]
