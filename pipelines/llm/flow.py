"""The Ray Data steps of one stage run, each from Parquet to Parquet.

input (the driver's table as Parquet, each row with its position) -> ``requests`` (rendered into
units, kept per batch, and their requests: one per key, prefix-sorted, marked when a shard
answers it) -> ``answer`` (the pending ones through the backend into durable response shards) ->
``output`` (units joined with their answers and assembled per block, each row with its position,
by which the driver orders the rows it reads back: Ray Data does not keep the order of blocks).
The driver counts rows from Parquet footers and sums two integer columns of the unique requests;
it builds no Python object per row or request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
import ray.data
from ray.data.datasource import FilenameProvider

from pipelines.llm import backends, cache
from pipelines.llm.assemble import assemble_units
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import (
    COPIES,
    ROW,
    SAMPLE,
    RenderConfig,
    RequestRenderer,
    TokenEstimator,
    explode_requests,
    first_per_key,
)
from udfs import storage
from udfs.prompts import Prompt

INPUT_FILE_ROWS = 1024  # input rows per Parquet file: the unit of parallel rendering
RENDER_BATCH = 256
CACHED = "__cached"  # of a unique request: 1 when a usable shard answers it
ASSEMBLE_BATCH = 1024


@contextlib.contextmanager
def stage_context(partitions: int) -> Iterator[None]:
    """The Ray Data settings of the datasets a stage creates inside: blocks keep their order (the
    sorted requests reach the engine in order), the request sort makes ``partitions`` ranges
    (one per input file; Ray's default is 200, whatever the size) and a UDF raises its own
    exception (a renderer's ValueError, an engine's error), not a Ray wrapper."""
    ctx = ray.data.DataContext.get_current()
    options = ctx.execution_options
    saved = options.preserve_order, ctx.default_hash_shuffle_parallelism, ctx.raise_original_map_exception
    options.preserve_order, ctx.raise_original_map_exception = True, True
    ctx.default_hash_shuffle_parallelism = max(1, partitions)
    try:
        yield
    finally:
        options.preserve_order, ctx.default_hash_shuffle_parallelism, ctx.raise_original_map_exception = saved


def read(uri: str, columns: Sequence[str] | None = None) -> ray.data.Dataset:
    """A Parquet directory as a Dataset of one block per file, in name order.

    The files are read by a map over their paths: ``ray.data.read_parquet`` samples and plans
    its reads with tasks of its own, a fixed ~2 s per execution that a stage's small
    intermediate files (three executions per stage) do not need."""
    files = located(storage.list_files(uri, ".parquet"))
    paths = ray.data.from_items(
        [{"path": p} for p in files["paths"]], override_num_blocks=len(files["paths"])
    )
    return paths.map_batches(
        _read_files, fn_kwargs={"fs": files["fs"], "columns": columns}, batch_size=1, batch_format="pyarrow"
    )


def _read_files(batch: pa.Table, fs: pafs.FileSystem | None, columns: Sequence[str] | None) -> pa.Table:
    """The Parquet files a batch of paths names, as one table."""
    return pa.concat_tables(
        pq.read_table(p, filesystem=fs, columns=columns) for p in batch.column("path").to_pylist()
    )


def write(ds: ray.data.Dataset, uri: str, **kwargs: Any) -> int:
    """Write a Dataset as Parquet under ``uri``; returns its rows (from the footers)."""
    fs, path = storage.filesystem(uri)
    ds.write_parquet(path, filesystem=fs, **kwargs)
    return storage.count_rows(uri)


def read_output(uri: str) -> pa.Table:
    """The stage's output rows in input order (row, then sample), without their positions: the
    driver's one read of the stage."""
    table = storage.read_table(uri)
    order = pc.sort_indices(table, [(ROW, "ascending"), (SAMPLE, "ascending")])
    return table.take(order).drop_columns([ROW, SAMPLE])


def write_input(rows: pa.Table, uri: str) -> int:
    """The stage input as Parquet files of ``INPUT_FILE_ROWS`` rows, each row with its position;
    returns the number of files."""
    rows = rows.append_column(ROW, pa.array(range(rows.num_rows), pa.int64()))
    starts = range(0, rows.num_rows, INPUT_FILE_ROWS)
    for n, start in enumerate(starts):
        storage.write_table(rows.slice(start, INPUT_FILE_ROWS), storage.join(uri, f"part-{n:06d}.parquet"))
    return len(starts)


def requests(
    input_uri: str, units_uri: str, requests_uri: str, renderer: RequestRenderer, shards: list[str]
) -> dict[str, int]:
    """Render the input into units (kept under ``units_uri``, one file per batch named by its
    first row) and their requests into the stage's unique requests, sorted by prompt text and
    each marked answered or not by the usable ``shards``: a range-partitioned sort puts every copy
    of a key in one block, where ``first_per_key`` keeps one. Returns the counts of units and of
    requests (all, unique, cached), read from Parquet footers and two integer columns."""
    unique = (
        read(input_uri)
        .map_batches(
            _render,
            fn_kwargs={"renderer": renderer, "units": storage.filesystem(units_uri)},
            batch_size=RENDER_BATCH,
            batch_format="pyarrow",
        )
        .sort(["prompt_text", "request_key"])
        .map_batches(first_per_key, batch_size=None, batch_format="pyarrow")
        .map_batches(_mark_answered, fn_kwargs=located(shards), batch_size=None, batch_format="pyarrow")
    )
    counts = {"units": 0, "total": 0, "unique": write(unique, requests_uri), "cached": 0}
    counts["units"] = storage.count_rows(units_uri)
    if counts["unique"]:
        sums = storage.read_table(requests_uri, columns=[COPIES, CACHED])
        counts["total"] = pc.sum(sums.column(COPIES)).as_py()
        counts["cached"] = pc.sum(sums.column(CACHED)).as_py()
    return counts


def located(uris: list[str]) -> dict[str, Any]:
    """Files as a filesystem and paths, to send to Ray workers: the driver's filesystem travels
    pickled with its endpoint and keys, so a worker reaches the storage as the driver does."""
    if not uris:
        return {"fs": None, "paths": []}
    return {"fs": storage.filesystem(uris[0])[0], "paths": [storage.filesystem(u)[1] for u in uris]}


def _render(batch: pa.Table, renderer: RequestRenderer, units: tuple[pafs.FileSystem, str]) -> pa.Table:
    """Render a batch of input rows: keep its units as one Parquet file, return their requests."""
    rendered = renderer(batch)
    fs, directory = units
    fs.create_dir(directory, recursive=True)
    pq.write_table(rendered, f"{directory}/part-{batch.column(ROW)[0].as_py():012d}.parquet", filesystem=fs)
    return explode_requests(rendered)


def _mark_answered(block: pa.Table, fs: pafs.FileSystem | None, paths: list[str]) -> pa.Table:
    """Mark the requests a usable shard answers (``__cached`` 1), reading only their keys."""
    done = cache.answered_keys(fs, paths, block.column("request_key").combine_chunks())
    return block.append_column(CACHED, pc.is_in(block.column("request_key"), value_set=done).cast(pa.int8()))


def pending(requests_uri: str) -> ray.data.Dataset:
    """The requests without a cached answer, in ``REQUEST_SCHEMA`` (block order kept)."""
    return read(requests_uri).map_batches(_unanswered, batch_size=None, batch_format="pyarrow")


def _unanswered(block: pa.Table) -> pa.Table:
    """The requests of a block that no shard answers, without the bookkeeping columns."""
    return block.filter(pc.equal(block.column(CACHED), 0)).drop_columns([COPIES, CACHED])


def estimate(requests_uri: str, cfg: RenderConfig) -> tuple[int, int]:
    """``--plan``: estimated prompt tokens and the output-token budget of the pending requests."""
    counted = pending(requests_uri).map_batches(TokenEstimator(cfg), batch_format="pyarrow")
    sums = counted.sum(["prompt_tokens", "output_tokens"])
    return int(sums["sum(prompt_tokens)"]), int(sums["sum(output_tokens)"])


class ShardNames(FilenameProvider):
    """``shard-<epoch ms>-<run tag>-<write uuid>-<task>-<i>.parquet``: newest-wins order by name."""

    def __init__(self, run_id: str):
        super().__init__()
        self.run_id = run_id

    def get_filename_for_task(self, write_uuid: str, task_index: int) -> str:
        return cache.shard_name(self.run_id, write_uuid, task_index)


def answer(requests_uri: str, stage_uri: str, llm: LLMConfig, run_id: str) -> None:
    """Send the pending requests (prefix-sorted within each block) through the backend and write
    the responses as durable shards of ``shard_size`` rows: an engine task answers one block, so
    blocks of a shard (or a batch) let write tasks take shards while the engine answers others."""
    blocks = pending(requests_uri).repartition(target_num_rows_per_block=max(llm.batch_size, llm.shard_size))
    responses = backends.apply_backend(blocks, llm).map_batches(
        backends.responses_table, batch_format="pyarrow"
    )
    fs, path = storage.filesystem(cache.responses_dir(stage_uri))
    responses.write_parquet(
        path,
        filesystem=fs,
        filename_provider=ShardNames(run_id),
        min_rows_per_file=llm.shard_size,
        max_rows_per_file=llm.shard_size,
    )


def output(
    units_uri: str,
    output_uri: str,
    stage: Any,
    prompt: Prompt,
    identity: dict[str, Any],
    shards: list[str],
    fresh: list[str],
) -> None:
    """Units joined with their answers and assembled per block (``assemble_units``), written to
    ``output_uri``."""
    assembled = read(units_uri).map_batches(
        _assemble_block,
        fn_kwargs={
            "stage": stage,
            "prompt": prompt,
            "identity": identity,
            **located([*shards, *fresh]),
            "fresh": frozenset(located(fresh)["paths"]),
        },
        batch_size=ASSEMBLE_BATCH,
        batch_format="pyarrow",
    )
    storage.delete(output_uri)
    write(assembled, output_uri)


def _assemble_block(
    block: pa.Table,
    stage: Any,
    prompt: Prompt,
    identity: dict[str, Any],
    fs: pafs.FileSystem | None,
    paths: list[str],
    fresh: frozenset[str],
) -> pa.Table:
    """The output rows of a block of units, with the answers of its own requests only."""
    keys = pc.unique(pc.list_flatten(block.column("__keys").combine_chunks()))
    found = cache.answers(fs, paths, keys, fresh)
    responses = {r["request_key"]: r for r in found.to_pylist()}
    return assemble_units(stage, prompt, identity, block, responses)
