"""One stage run as one Ray Data execution.

    input blocks (the driver's rows, each with its position) -> render into units (Ray workers)
    -> sort the units by prompt text -> ``Partition`` (per range: drop duplicate and cached
    requests, write the units whose answers are all cached) -> backend -> ``Collector`` (write
    the responses as shards as they arrive, and the other units as their partition completes)

The sort is the one exchange: it puts every copy of a request, and requests that share a prefix,
into one range, so duplicates are dropped within a block and the engine receives its requests in
prompt order (a single input block needs no sort). The shards are written as the responses
arrive; the output rows by ``Partition`` (the units answered from the cache) and ``Collector``
(the others), in a file per partition, which the driver reads back and puts in input order by
the rows' positions (a scatter, not a sort). Ray Data's ``write_parquet`` is no sink here: it
removes the directory it created when it wrote no row, and ``Partition``'s files with it. A
plan, or a stage answered before on the same inputs, stops after ``Partition``: no engine
starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data

from pipelines.llm import backends
from pipelines.llm.config import LLMConfig
from pipelines.llm.partition import COUNTS, PART, PENDING, PLAN_COUNTS, Collector, Partition, StageWork
from pipelines.llm.render import ORDER, ROW, SAMPLE, RequestRenderer
from udfs import storage

INPUT_BLOCK_ROWS = 1024  # input rows per block: the unit of parallel rendering, and of a sort range
RENDER_BATCH = 256


@contextlib.contextmanager
def stage_context() -> Iterator[None]:
    """The Ray Data settings of a stage's execution: blocks keep their order (the sorted requests
    reach the engine in order, and a partition's responses arrive together), the sort runs as
    plain tasks (Ray's newer sort starts a worker pool of its own per execution, a fixed cost of
    seconds), a UDF raises its own exception (a renderer's ValueError, an engine's error), not
    a Ray wrapper, and no block is split by size: a partition's requests stay in one block, which
    one in-process engine task answers whole."""
    ctx = ray.data.DataContext.get_current()
    options = ctx.execution_options
    saved = (
        options.preserve_order,
        ctx.raise_original_map_exception,
        ctx.shuffle_strategy,
        ctx.target_max_block_size,
    )
    options.preserve_order, ctx.raise_original_map_exception = True, True
    ctx.shuffle_strategy = ray.data.context.ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    ctx.target_max_block_size = None
    try:
        yield
    finally:
        (
            options.preserve_order,
            ctx.raise_original_map_exception,
            ctx.shuffle_strategy,
            ctx.target_max_block_size,
        ) = saved


def execute(rows: pa.Table, renderer: RequestRenderer, work: StageWork, llm: LLMConfig) -> None:
    """Run the stage over ``rows`` (see the module docstring): the output rows land in
    ``work.output``, the new responses in ``work.shards``."""
    rows = rows.append_column(ROW, pa.array(np.arange(rows.num_rows), pa.int64()))
    blocks = [rows.slice(start, INPUT_BLOCK_ROWS) for start in range(0, rows.num_rows, INPUT_BLOCK_ROWS)]
    units = ray.data.from_arrow(blocks).map_batches(renderer, batch_size=RENDER_BATCH, batch_format="pyarrow")
    if len(blocks) > 1:
        units = units.sort(ORDER)
    pending = units.map_batches(Partition(work), batch_size=None, batch_format="pyarrow")
    if not work.engine:
        pending.materialize()
        return
    then = (Collector, {"work": work})
    # the collector returns nothing: it writes the shards and the output rows
    backends.apply_backend(pending, llm, then=then, carry=(PART, PENDING)).materialize()


def read_output(uri: str, rows: int, samples: int) -> tuple[pa.Table, dict[str, int]]:
    """The stage's output rows in input order (row, then sample) without their positions and
    counts, and the sums of the counts. A row's position says its place in the output, so the
    rows are put in order by scattering them there (no sort)."""
    table = storage.read_table(uri)
    units = rows * samples
    place = np.asarray(table.column(ROW)) * samples + np.asarray(table.column(SAMPLE))
    if table.num_rows != units or (units and np.bincount(place, minlength=units).max() != 1):
        raise RuntimeError(f"the stage's output has {table.num_rows} rows for {units} units")
    order = np.empty(units, np.int64)
    order[place] = np.arange(units)
    counted = [c for c in (*COUNTS, *PLAN_COUNTS) if c in table.column_names]
    sums = {c: int(pc.sum(table.column(c)).as_py() or 0) for c in counted}
    return table.take(pa.array(order)).drop_columns([ROW, SAMPLE, *counted]), sums
