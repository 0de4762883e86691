"""The Ray Data steps of one stage run, each from Parquet to Parquet.

input (the driver's table as Parquet, each row with its position) -> ``requests`` (rendered into
units, kept per batch, and their requests: one per key, marked when a shard answers it) ->
``answer`` (the pending ones, sorted by prompt text, through the backend into durable response
shards) -> ``output`` (each (unit, request) pair joined with the newest answer of its key by a
sort on the key, then assembled per range of positions, each row with its position, by which the
driver orders the rows it reads back). The cache is consulted by sorting, never by a lookup per
block, so each shard is read once per step. The driver counts rows from Parquet footers and sums
two integer columns of the unique requests; it builds no Python object per row or request.
"""

from __future__ import annotations

import bisect
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
)
from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA
from udfs.prompts import Prompt

INPUT_FILE_ROWS = 1024  # input rows per Parquet file: the unit of parallel rendering
RENDER_BATCH = 256


@contextlib.contextmanager
def stage_context(partitions: int) -> Iterator[None]:
    """The Ray Data settings of the datasets a stage creates inside: blocks keep their order (the
    sorted requests reach the engine in order), a sort makes ``partitions`` ranges (one per
    input file; Ray's default is 200, whatever the size) and a UDF raises its own
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
    """A Parquet directory as a Dataset of one block per file, in name order."""
    return read_files(storage.list_files(uri, ".parquet"), columns)


def read_files(
    uris: Sequence[str], columns: Sequence[str] | None = None, **per_file: Sequence[Any]
) -> ray.data.Dataset:
    """Parquet files as a Dataset of one block per file, in the given order; ``per_file`` names
    columns of one value per file (e.g. a shard's age), added to each of its rows.

    The files are read by a map over their paths: ``ray.data.read_parquet`` samples and plans
    its reads with tasks of its own, a fixed ~2 s per execution that a stage's small
    intermediate files do not need."""
    files = located(list(uris))
    items = [{"path": p, **{k: v[i] for k, v in per_file.items()}} for i, p in enumerate(files["paths"])]
    return ray.data.from_items(items, override_num_blocks=max(1, len(items))).map_batches(
        _read_files, fn_kwargs={"fs": files["fs"], "columns": columns}, batch_size=1, batch_format="pyarrow"
    )


def _read_files(batch: pa.Table, fs: pafs.FileSystem | None, columns: Sequence[str] | None) -> pa.Table:
    """The Parquet file a row of ``read_files`` names, with that row's other values as columns."""
    (item,) = batch.to_pylist()
    table = pq.read_table(item.pop("path"), filesystem=fs, columns=columns)
    for name, value in item.items():
        table = table.append_column(name, pa.repeat(value, table.num_rows))
    return table


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
    first row) and their requests into the stage's unique requests, each marked answered or not
    by the usable ``shards``: the requests and the keys the shards answer (as marker rows) are
    sorted by key together, which puts every copy of a key in one block, where
    ``cache.unique_requests`` keeps one. Returns the counts of units and of requests (all,
    unique, cached), read from Parquet footers and two integer columns."""
    rendered = read(input_uri).map_batches(
        _render,
        fn_kwargs={"renderer": renderer, "units": storage.filesystem(units_uri)},
        batch_size=RENDER_BATCH,
        batch_format="pyarrow",
    )
    if shards:
        answered = read_files(shards, ["request_key", "engine_error"]).map_batches(
            cache.answered_markers, batch_format="pyarrow"
        )
        rendered = rendered.union(answered)
    unique = rendered.sort("request_key").map_batches(
        cache.unique_requests, batch_size=None, batch_format="pyarrow"
    )
    counts = {"units": 0, "total": 0, "unique": write(unique, requests_uri), "cached": 0}
    counts["units"] = storage.count_rows(units_uri)
    if counts["unique"]:
        sums = storage.read_table(requests_uri, columns=[COPIES, cache.CACHED])
        counts["total"] = pc.sum(sums.column(COPIES)).as_py()
        counts["cached"] = pc.sum(sums.column(cache.CACHED)).as_py()
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


def pending(requests_uri: str) -> ray.data.Dataset:
    """The requests without a cached answer, in ``REQUEST_SCHEMA`` (block order kept)."""
    return read(requests_uri).map_batches(_unanswered, batch_size=None, batch_format="pyarrow")


def _unanswered(block: pa.Table) -> pa.Table:
    """The requests of a block that no shard answers, without the bookkeeping columns."""
    return block.filter(pc.equal(block.column(cache.CACHED), 0)).drop_columns([COPIES, cache.CACHED])


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
    """Send the pending requests, sorted by prompt text (requests sharing a prefix stay adjacent
    for the engine's prefix cache), through the backend and write
    the responses as durable shards of ``shard_size`` rows: an engine task answers one block, so
    blocks of a shard (or a batch) let write tasks take shards while the engine answers others."""
    ordered = pending(requests_uri).sort(["prompt_text", "request_key"])
    blocks = ordered.repartition(target_num_rows_per_block=max(llm.batch_size, llm.shard_size))
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
    """Units joined with their answers and assembled, written to ``output_uri``: the units'
    (unit, request) pairs and the shards' rows are sorted by key together, where each pair takes
    the newest answer of its key (``cache.attach_answers``); the answered pairs are sorted by
    position, and each block of them is assembled with the units of its positions, read from
    the one or two unit files that hold them."""
    units = storage.list_files(units_uri, ".parquet")
    pairs = read_files(units, [ROW, SAMPLE, "__keys"]).map_batches(_pairs, batch_format="pyarrow")
    everyone = [*shards, *fresh]
    if everyone:
        rows = read_files(
            everyone, **{cache.AGE: list(range(len(everyone))), cache.FRESH: [f in fresh for f in everyone]}
        )
        pairs = pairs.union(rows.map_batches(cache.served, batch_format="pyarrow"))
    answered = pairs.sort("request_key").map_batches(
        cache.attach_answers, batch_size=None, batch_format="pyarrow"
    )
    assembled = answered.sort(ROW).map_batches(
        _assemble_rows,
        fn_kwargs={
            "stage": stage,
            "prompt": prompt,
            "identity": identity,
            "starts": [int(u.rsplit("-", 1)[-1].split(".")[0]) for u in units],
            **located(units),
        },
        batch_size=None,
        batch_format="pyarrow",
    )
    storage.delete(output_uri)
    write(assembled, output_uri)


def _pairs(units: pa.Table) -> pa.Table:
    """One (unit, request) pair per request key of a block of units, in the join schema without
    answers; a unit without requests gets one pair of key ``""`` (no answer has it) so that
    every unit reaches assembly."""
    keys = pc.if_else(
        pc.greater(pc.list_value_length(units.column("__keys")), 0),
        units.column("__keys"),
        pa.scalar([""], pa.list_(pa.string())),
    )
    nested = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    parents = pc.list_parent_indices(nested)
    n = len(parents)
    own = {
        ROW: units.column(ROW).take(parents),
        SAMPLE: units.column(SAMPLE).take(parents),
        "request_key": pc.list_flatten(nested),
    }
    return pa.table(
        [own.get(f.name, pa.nulls(n, f.type)) for f in cache.JOIN_SCHEMA], schema=cache.JOIN_SCHEMA
    )


def _assemble_rows(
    answered: pa.Table,
    stage: Any,
    prompt: Prompt,
    identity: dict[str, Any],
    starts: list[int],
    fs: pafs.FileSystem | None,
    paths: list[str],
) -> pa.Table:
    """The output rows of a block of answered pairs (all pairs of each of its positions): its
    units, read from the unit files whose rows (from ``starts``) overlap its positions, each
    with the answers of its own requests."""
    files, wanted = [], None
    if answered.num_rows:
        span = pc.min_max(answered.column(ROW))
        low, high = span["min"].as_py(), span["max"].as_py()
        files = paths[max(0, bisect.bisect_right(starts, low) - 1) : bisect.bisect_right(starts, high)]
        wanted = (pc.field(ROW) >= low) & (pc.field(ROW) <= high)
    units = pa.concat_tables(
        [pq.read_schema(paths[0], filesystem=fs).empty_table()]
        + [pq.read_table(p, filesystem=fs, filters=wanted) for p in files]
    )
    units = units.take(pc.sort_indices(units, [(ROW, "ascending"), (SAMPLE, "ascending")]))
    found = answered.filter(pc.is_valid(answered.column(cache.AGE))).select(RESPONSE_SCHEMA.names)
    responses = {r["request_key"]: r for r in found.to_pylist()}
    return assemble_units(stage, prompt, identity, units, responses)
