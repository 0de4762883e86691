"""The Ray Data steps of one stage run, each from Parquet to Parquet.

input (the driver's table, as Parquet) -> ``render`` (units, with their requests nested) ->
``explode`` (every request) -> ``dedup`` (one per key, prefix-sorted) -> ``drop_answered``
(pending: no cached answer) -> ``answer`` (the backend, durable response shards) -> ``output``
(units joined with their answers, assembled per block). Every dataset keeps its block order, so
the output rows come out in input order; the driver only counts rows from Parquet footers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import ray
import ray.data
from ray.data.datasource import FilenameProvider

from pipelines.llm import backends, cache
from pipelines.llm.assemble import assemble_units
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import (
    ROW,
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
ASSEMBLE_BATCH = 1024


@contextlib.contextmanager
def ordered() -> Iterator[None]:
    """Datasets created inside keep their block order (the output is in input order) and raise a
    UDF's own exception (a renderer's ValueError, not a Ray wrapper)."""
    ctx = ray.data.DataContext.get_current()
    saved = ctx.execution_options.preserve_order, ctx.raise_original_map_exception
    ctx.execution_options.preserve_order = ctx.raise_original_map_exception = True
    try:
        yield
    finally:
        ctx.execution_options.preserve_order, ctx.raise_original_map_exception = saved


def read(uri: str, columns: Sequence[str] | None = None) -> ray.data.Dataset:
    """A Parquet directory as a Dataset, its files in name order."""
    fs, _ = storage.filesystem(uri)
    paths = [storage.filesystem(f)[1] for f in storage.list_files(uri, ".parquet")]
    return ray.data.read_parquet(paths, filesystem=fs, columns=columns, partitioning=None)


def write(ds: ray.data.Dataset, uri: str, **kwargs: Any) -> int:
    """Write a Dataset as Parquet under ``uri``; returns its rows (from the footers)."""
    fs, path = storage.filesystem(uri)
    ds.write_parquet(path, filesystem=fs, **kwargs)
    return storage.count_rows(uri)


def read_table(uri: str) -> pa.Table:
    """A Parquet directory as one Arrow table, its files in name order (the driver's read-back)."""
    fs, _ = storage.filesystem(uri)
    paths = [storage.filesystem(f)[1] for f in storage.list_files(uri, ".parquet")]
    return pads.dataset(paths, filesystem=fs, format="parquet").to_table()


def write_input(rows: pa.Table, uri: str) -> None:
    """The stage input as Parquet files of ``INPUT_FILE_ROWS`` rows, each row with its position."""
    rows = rows.append_column(ROW, pa.array(range(rows.num_rows), pa.int64()))
    for n, start in enumerate(range(0, rows.num_rows, INPUT_FILE_ROWS)):
        storage.write_table(rows.slice(start, INPUT_FILE_ROWS), storage.join(uri, f"part-{n:06d}.parquet"))


def render(input_uri: str, units_uri: str, cfg: RenderConfig, stage: Any, prompt: Prompt) -> int:
    """Input rows to unit rows (``RequestRenderer``, one tokenizer per worker); returns units."""
    units = read(input_uri).map_batches(
        RequestRenderer,
        fn_constructor_args=(cfg, stage, prompt),
        batch_size=RENDER_BATCH,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
    )
    return write(units, units_uri)


def explode(units_uri: str, requests_uri: str) -> int:
    """Every request of every unit (duplicates included); returns their number."""
    requests = read(units_uri, columns=[ROW, "__requests"]).map_batches(
        explode_requests, batch_size=None, batch_format="pyarrow"
    )
    return write(requests, requests_uri)


def dedup(requests_uri: str, unique_uri: str) -> int:
    """One request per key, sorted by prompt text: a range-partitioned sort puts every copy of a
    key in one block, where ``first_per_key`` keeps one. Returns the unique requests."""
    unique = (
        read(requests_uri)
        .sort(["prompt_text", "request_key"])
        .map_batches(first_per_key, batch_size=None, batch_format="pyarrow")
    )
    return write(unique, unique_uri)


def drop_answered(unique_uri: str, pending_uri: str, shards: list[str]) -> int:
    """The requests no usable shard answers (block order kept); returns their number."""
    pending = read(unique_uri).map_batches(
        _unanswered, fn_kwargs={"shards": shards}, batch_size=None, batch_format="pyarrow"
    )
    return write(pending, pending_uri)


def _unanswered(block: pa.Table, shards: list[str]) -> pa.Table:
    done = cache.answered_keys(shards, block.column("request_key").combine_chunks())
    return block.filter(pc.invert(pc.is_in(block.column("request_key"), value_set=done)))


def estimate(pending_uri: str, cfg: RenderConfig) -> tuple[int, int]:
    """``--plan``: estimated prompt tokens and the output-token budget of the pending requests."""
    counted = read(pending_uri, columns=["prompt_text", "mode", "max_tokens"]).map_batches(
        TokenEstimator,
        fn_constructor_args=(cfg,),
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=1),
    )
    sums = counted.sum(["prompt_tokens", "output_tokens"])
    return int(sums["sum(prompt_tokens)"]), int(sums["sum(output_tokens)"])


class ShardNames(FilenameProvider):
    """``shard-<epoch ms>-<run tag>-<write uuid>-<task>-<i>.parquet``: newest-wins order by name."""

    def __init__(self, run_id: str):
        super().__init__()
        self.run_id = run_id

    def get_filename_for_task(self, write_uuid: str, task_index: int) -> str:
        return cache.shard_name(self.run_id, write_uuid, task_index)


def answer(pending_uri: str, stage_uri: str, llm: LLMConfig, run_id: str) -> None:
    """Send the pending requests (prefix-sorted within each block) through the backend and write
    the responses as durable shards of ``shard_size`` rows, each as soon as it is full."""
    responses = backends.apply_backend(read(pending_uri), llm).map_batches(
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
    """Units joined with their answers and assembled per block (``assemble_units``), in input
    order, written to ``output_uri``."""
    assembled = read(units_uri).map_batches(
        _assemble_block,
        fn_kwargs={
            "stage": stage,
            "prompt": prompt,
            "identity": identity,
            "shards": [*shards, *fresh],
            "fresh": frozenset(fresh),
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
    shards: list[str],
    fresh: frozenset[str],
) -> pa.Table:
    keys = pc.unique(pc.list_flatten(block.column("__keys").combine_chunks()))
    found = cache.answers(shards, keys, fresh)
    responses = {r["request_key"]: r for r in found.to_pylist()}
    return assemble_units(stage, prompt, identity, block, responses)
