"""The two stateful steps of a stage's Ray Data execution, around the backend.

``Partition`` takes one range of the stage's units, sorted by prompt text: every copy of a
request is in it, so it keeps the first copy of each key, looks the keys up in the cache index
and reads their cached answers, and splits its units. Units whose every answer is cached are
assembled there and written to the output; the others (*waiting* units) and the partition's
cached answers are written to its scratch files, and its pending requests go on to the
backend, sorted by prompt text and tagged with the partition and how many requests it sent.

``Collector`` follows the backend (``backends.apply_backend``: in the engine's own task for an
in-process engine): it writes the responses as shards of ``shard_size`` as they arrive (the
durable cache) and keeps them by partition; when a partition has all its responses, it reads
the partition's scratch file, assembles its waiting units and writes them to the output.

Output rows carry the unit's counts (``__n_requests``: its requests; ``__n_unique``: the keys it
is the first to ask; ``__n_cached``: those answered from the cache; in a plan,
``__n_prompt_tokens`` and ``__n_output_tokens`` of its pending ones), from which the driver sums
the stage's counts.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipelines.llm import cache
from pipelines.llm.assemble import assemble_units
from pipelines.llm.backends import responses_table
from pipelines.llm.render import ROW, SAMPLE, RenderConfig, Tokenizing
from udfs import storage
from udfs.llm_rows import REQUEST_SCHEMA, RESPONSE_SCHEMA, SCORE
from udfs.prompts import Prompt

PART, PENDING = "__part", "__pending"  # of a pending request: its partition, and that one's requests sent
COUNTS = ("__n_requests", "__n_unique", "__n_cached")
PLAN_COUNTS = ("__n_prompt_tokens", "__n_output_tokens")
PENDING_SCHEMA = pa.schema([*REQUEST_SCHEMA, pa.field(PART, pa.int64()), pa.field(PENDING, pa.int64())])


@dataclass(frozen=True)
class Place:
    """A directory as a filesystem and a path: the driver's filesystem travels pickled with its
    endpoint and keys, so a worker reaches the storage as the driver does."""

    fs: pafs.FileSystem
    path: str

    @staticmethod
    def of(uri: str) -> Place:
        return Place(*storage.filesystem(uri))

    def write(self, table: pa.Table, name: str) -> None:
        """Write a Parquet file here, creating the directory if a write needs it (on S3 none
        does, and each creation would be a request)."""
        try:
            pq.write_table(table, f"{self.path}/{name}", filesystem=self.fs)
        except FileNotFoundError:
            self.fs.create_dir(self.path, recursive=True)
            pq.write_table(table, f"{self.path}/{name}", filesystem=self.fs)

    def read(self, name: str) -> pa.Table:
        return pq.read_table(f"{self.path}/{name}", filesystem=self.fs)


@dataclass(frozen=True)
class StageWork:
    """What the steps of one stage run need, in workers: plain picklable data."""

    stage: Any
    prompt: Prompt
    identity: dict[str, Any]
    render: RenderConfig
    output: Place  # the stage's output rows
    parts: Place  # the waiting units of each partition (scratch)
    shards: Place  # the stage's response shards
    shard_size: int  # responses per shard
    run_id: str  # names this run's shards (``cache.shard_name``)
    index: Any = None  # ObjectRef of the ``cache.CacheIndex``, None without usable shards
    engine: bool = True  # False: every unit is written by ``Partition``, unanswered ones not run
    estimate: bool = False  # ``--plan``: count the pending requests' tokens

    def assemble(self, units: pa.Table, answers: pa.Table) -> pa.Table:
        """Output rows of units with their count columns, given the answers."""
        counts = [c for c in (*COUNTS, *PLAN_COUNTS) if c in units.column_names]
        out = assemble_units(self.stage, self.prompt, self.identity, units.drop_columns(counts), answers)
        for name in counts:
            out = out.append_column(name, units.column(name))
        return out


class Partition:
    """``map_batches`` UDF over the blocks of the sorted units (``batch_size=None``)."""

    def __init__(self, work: StageWork):
        self.work = work
        self.tokens = Tokenizing(work.render)

    def __call__(self, units: pa.Table) -> pa.Table:
        work = self.work
        if not units.num_rows:
            return PENDING_SCHEMA.empty_table()
        requests, unit_of = _requests(units)
        first = _first_copies(requests, units, unit_of)
        unique, owner = requests.take(pa.array(first)), unit_of[first]
        cached = self.cached(unique.column("request_key"))
        is_cached = np.asarray(
            pc.is_in(unique.column("request_key"), value_set=cached.column("request_key")), bool
        )
        pending = unique.filter(pa.array(~is_cached))
        n = units.num_rows
        counts = (
            _lengths(units),
            np.bincount(owner, minlength=n),
            np.bincount(owner[is_cached], minlength=n),
        )
        units = _with(units, dict(zip(COUNTS, counts, strict=True)))
        # a partition is named by its first unit's place in the output: the same in a retried task
        part = int(
            pc.min(pc.add(pc.multiply(units.column(ROW), work.stage.samples), units.column(SAMPLE))).as_py()
        )
        if not work.engine:
            if work.estimate:
                units = _with(units, self.estimates(pending, owner[~is_cached], n))
            work.output.write(work.assemble(units, cached), f"part-{part:012d}-a.parquet")
            return PENDING_SCHEMA.empty_table()
        asks = np.asarray(
            pc.is_in(pc.list_flatten(units.column("__keys")), value_set=pending.column("request_key")), bool
        )
        waiting = pa.array(np.bincount(unit_of, weights=asks, minlength=n) > 0)
        ready = units.filter(pc.invert(waiting))
        if ready.num_rows:
            work.output.write(work.assemble(ready, cached), f"part-{part:012d}-a.parquet")
        if not pending.num_rows:
            return PENDING_SCHEMA.empty_table()
        work.parts.write(units.filter(waiting), f"{part:012d}.units.parquet")
        work.parts.write(cached, f"{part:012d}.answers.parquet")
        pending = pending.take(
            pc.sort_indices(pending, [("prompt_text", "ascending"), ("request_key", "ascending")])
        )
        tags = {PART: part, PENDING: pending.num_rows}
        for name, value in tags.items():
            pending = pending.append_column(name, pa.repeat(pa.scalar(value, pa.int64()), pending.num_rows))
        return pending

    def cached(self, keys: pa.ChunkedArray) -> pa.Table:
        """The cached answers of ``keys`` (none without a cache index)."""
        import ray

        if self.work.index is None:
            return RESPONSE_SCHEMA.empty_table()
        return ray.get(self.work.index).answers(keys)

    def estimates(self, pending: pa.Table, owner: np.ndarray, n: int) -> dict[str, np.ndarray]:
        """``--plan``: per unit, the estimated prompt tokens and the output budget of the pending
        requests it is the first to ask (one token for a scoring request)."""
        tokens = [self.tokens.count_tokens(t) for t in pending.column("prompt_text").to_pylist()]
        budget = pc.if_else(
            pc.equal(pending.column("mode"), SCORE), 1, pending.column("max_tokens").cast(pa.int64())
        )
        weights = (np.asarray(tokens, np.float64), np.asarray(budget, np.float64))
        return {
            name: np.bincount(owner, weights=w, minlength=n)
            for name, w in zip(PLAN_COUNTS, weights, strict=True)
        }


class Collector:
    """Consumer of the backend's responses (see the module docstring): a partition's responses
    all reach the same one (the processors' one actor, or an in-process engine's task, which
    gets the partition's block whole)."""

    def __init__(self, work: StageWork):
        self.work = work
        self.fresh: dict[int, list[pa.Table]] = defaultdict(list)
        self.unsaved: list[pa.Table] = []  # responses not in a shard yet
        self.writer, self.written = uuid.uuid4().hex[:8], 0

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = responses_table(batch, carry=(PART, PENDING))
        self.unsaved.append(batch.select(RESPONSE_SCHEMA.names))
        self.save(whole_shards_only=True)
        parts = np.asarray(batch.column(PART))
        for part in np.unique(parts):
            rows = batch.filter(pa.array(parts == part))
            self.fresh[part].append(rows.select(RESPONSE_SCHEMA.names))
            if sum(t.num_rows for t in self.fresh[part]) == rows.column(PENDING)[0].as_py():
                self.save(whole_shards_only=False)
                self.finish(int(part))
        return pa.table({})

    def save(self, whole_shards_only: bool) -> None:
        """Write the unsaved responses as shards of ``shard_size``; the rest too unless asked
        for whole shards only (a partition is complete: its responses must all be durable)."""
        size = self.work.shard_size
        pending = pa.concat_tables(self.unsaved) if self.unsaved else RESPONSE_SCHEMA.empty_table()
        end = pending.num_rows - pending.num_rows % size if whole_shards_only else pending.num_rows
        for start in range(0, end, size):
            name = cache.shard_name(self.work.run_id, self.writer, self.written)
            self.work.shards.write(pending.slice(start, min(size, end - start)), name)
            self.written += 1
        self.unsaved = [pending.slice(end)] if end < pending.num_rows else []

    def finish(self, part: int) -> None:
        """Assemble and write the waiting units of a partition that has all its answers."""
        work = self.work
        units = work.parts.read(f"{part:012d}.units.parquet")
        cached = work.parts.read(f"{part:012d}.answers.parquet").cast(RESPONSE_SCHEMA)
        answers = pa.concat_tables([cached, *self.fresh.pop(part)])
        work.output.write(work.assemble(units, answers), f"part-{part:012d}-b.parquet")


def _requests(units: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """The requests of a block of units, one row each, and the index of the unit of each."""
    nested = units.column("__requests").combine_chunks()
    flat = pc.list_flatten(nested)
    if not len(flat):
        return REQUEST_SCHEMA.empty_table(), np.array([], np.int64)
    return pa.Table.from_struct_array(flat).cast(REQUEST_SCHEMA), np.asarray(pc.list_parent_indices(nested))


def _first_copies(requests: pa.Table, units: pa.Table, unit_of: np.ndarray) -> np.ndarray:
    """Indexes of the first copy of each key: the one of the earliest input row and sample."""
    if not requests.num_rows:
        return np.array([], np.int64)
    at = pa.array(unit_of)
    keyed = pa.table(
        {
            "key": requests.column("request_key"),
            "row": units.column(ROW).take(at),
            "sample": units.column(SAMPLE).take(at),
        }
    )
    order = np.asarray(
        pc.sort_indices(keyed, [("key", "ascending"), ("row", "ascending"), ("sample", "ascending")])
    )
    keys = keyed.column("key").take(pa.array(order)).combine_chunks()
    starts = np.ones(len(keys), bool)
    starts[1:] = np.asarray(pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)), bool)
    return order[starts]


def _lengths(units: pa.Table) -> np.ndarray:
    """Each unit's number of requests."""
    return np.diff(np.asarray(units.column("__keys").combine_chunks().offsets))


def _with(table: pa.Table, columns: dict[str, np.ndarray]) -> pa.Table:
    for name, values in columns.items():
        table = table.append_column(name, pa.array(np.asarray(values, np.int64)))
    return table
