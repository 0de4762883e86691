"""The request cache of a stage: durable response shards under ``<stage>/responses/``.

Ray Data writes each shard (``write_parquet``) as its responses arrive, named
``shard-<epoch ms>-<run id>-<n>.parquet`` so that the newest answer of a request wins when a
forced run answered it again. Engine errors (an outage, an out-of-memory batch, a prompt over the
length limit) stay in their shards as a record but are never served from the cache: a rerun
sends those requests again. A shard that cannot be read (a torn write, a truncated upload) is
logged, set aside as ``<name>.corrupt`` and its requests are computed again.

The lookups (``answered_keys``, ``answers``) run per block in Ray workers over the shard list
the driver made once (``usable_shards``): only the block's keys are read into Python.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA

log = logging.getLogger("augury.llm.cache")

_NAME = re.compile(r"shard-(\d{13})-")


def new_run_id() -> str:
    """Shard-name prefix of one run: its start time (for newest-wins ordering) and a random tag."""
    return f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"


def shard_name(run_id: str, write_uuid: str, task: int) -> str:
    """A shard's file name (Ray Data wants its write's uuid in it); ``{i}`` is left for Arrow's
    file counter within one write task."""
    return f"shard-{run_id}-{write_uuid}-{task:05d}-{{i}}.parquet"


def run_shards(stage_uri: str, run_id: str) -> list[str]:
    """The shards one run wrote, in name order."""
    return [f for f in shards(stage_uri) if f.rsplit("/", 1)[-1].startswith(f"shard-{run_id}-")]


def responses_dir(stage_uri: str) -> str:
    return storage.join(stage_uri, "responses")


def _age(uri: str) -> tuple[int, str]:
    """Sort key: the shard's run time (0 for shards named before times were recorded), then name."""
    name = uri.rsplit("/", 1)[-1]
    found = _NAME.match(name)
    return (int(found.group(1)) if found else 0, name)


def shards(stage_uri: str) -> list[str]:
    """Every shard file of a stage, oldest first."""
    return sorted(storage.list_files(responses_dir(stage_uri), ".parquet"), key=_age)


def usable_shards(stage_uri: str, stage: str) -> list[str]:
    """The shards whose footer reads, oldest first; the others are set aside (``.corrupt``)."""
    usable = []
    for file in shards(stage_uri):
        fs, path = storage.filesystem(file)
        try:
            with fs.open_input_file(path) as f:
                pq.read_metadata(f)
        except (pa.ArrowInvalid, OSError) as exc:
            _set_aside(file, stage, exc)
            continue
        usable.append(file)
    return usable


def shard_counts(file: str) -> tuple[int, int]:
    """Rows and engine errors of a shard, from its footer (no data is read)."""
    fs, path = storage.filesystem(file)
    with fs.open_input_file(path) as f:
        meta = pq.read_metadata(f)
    column = meta.schema.names.index("engine_error")
    stats = [meta.row_group(g).column(column).statistics for g in range(meta.num_row_groups)]
    if any(s is None or not s.has_null_count for s in stats):  # a writer without statistics
        errors = storage.read_table(file, columns=["engine_error"]).column("engine_error")
        return meta.num_rows, meta.num_rows - errors.null_count
    return meta.num_rows, meta.num_rows - sum(s.null_count for s in stats)


def answers(
    fs: pafs.FileSystem, paths: Sequence[str], keys: pa.Array, fresh: frozenset[str] = frozenset()
) -> pa.Table:
    """The newest answer of each of ``keys`` in the shards at ``paths`` (oldest first) on ``fs``
    (the driver's filesystem, pickled: a Ray worker reaches the storage as the driver does). An
    engine error counts only from a ``fresh`` shard (this run's: it is the row's outcome, never a
    cached answer)."""
    found = [RESPONSE_SCHEMA.empty_table()]
    for path in paths:
        table = _read(fs, path)
        wanted = pc.is_in(table.column("request_key"), value_set=keys)
        if path not in fresh:
            wanted = pc.and_(wanted, pc.is_null(table.column("engine_error")))
        found.append(table.filter(wanted))
    return _newest(pa.concat_tables(found))


def answered_keys(fs: pafs.FileSystem, paths: Sequence[str], keys: pa.Array) -> pa.Array:
    """Which of ``keys`` the shards at ``paths`` answer without an engine error."""
    found = [pa.array([], pa.string())]
    for path in paths:
        table = _read(fs, path, ["request_key", "engine_error"])
        answered = pc.is_in(table.column("request_key"), value_set=keys)
        ok = pc.and_(answered, pc.is_null(table.column("engine_error")))
        found += table.column("request_key").filter(ok).chunks
    return pa.concat_arrays(found)


def _read(fs: pafs.FileSystem, path: str, columns: list[str] | None = None) -> pa.Table:
    return pads.dataset(path, filesystem=fs, schema=RESPONSE_SCHEMA, format="parquet").to_table(
        columns=columns
    )


def _newest(table: pa.Table) -> pa.Table:
    """The last row of every key (rows come oldest first)."""
    if table.num_rows == 0:
        return table
    position = pa.array(range(table.num_rows), pa.int64())
    last = table.append_column("__at", position).group_by("request_key").aggregate([("__at", "max")])
    return table.take(last.column("__at_max"))


def _set_aside(file: str, stage: str, exc: Exception) -> None:
    log.warning(
        "stage %s: response shard %s cannot be read (%s); its requests are computed again; "
        "the file is kept as %s.corrupt",
        stage,
        file,
        str(exc).splitlines()[0][:200],
        file.rsplit("/", 1)[-1],
    )
    fs, path = storage.filesystem(file)
    try:
        fs.move(path, path + ".corrupt")
    except (OSError, pa.ArrowException) as move_exc:  # read-only storage: leave it in place
        log.warning("stage %s: could not rename %s: %s", stage, file, move_exc)
