"""The request cache of a stage: durable response shards under ``<stage>/responses/``.

The stage's collector writes each block of responses as a shard as it arrives, named
``shard-<epoch ms>-<run tag>-<writer>-<n>.parquet`` so that the newest answer of a request wins
when a forced run answered it again. Engine errors (an outage, an out-of-memory batch, a prompt over the
length limit) stay in their shards as a record but are never served from the cache: a rerun
sends those requests again. A shard that cannot be read (a torn write, a truncated upload) is
logged, set aside as ``<name>.corrupt`` and its requests are computed again.

Before a stage runs, a Ray task reads the key column of every usable shard into a
``CacheIndex``: the answered keys, sorted, each with the newest shard that answers it without an
engine error (as Ray Data's ``CheckpointConfig`` loads the ids it filters by into a sorted array
held in the object store, not in the driver). Each partition of the stage's units looks its keys
up in the index and reads only the shards that hold its answers; the shards were written in
prompt order, as the partitions are cut, so a partition reads few of them.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA

log = logging.getLogger("augury.llm.cache")

_NAME = re.compile(r"shard-(\d{13})-")


def new_run_id() -> str:
    """Shard-name prefix of one run: its start time (for newest-wins ordering) and a random tag."""
    return f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"


def shard_name(run_id: str, writer: str, n: int) -> str:
    """The file name of the ``n``-th shard one writer (a uuid) writes in a run."""
    return f"shard-{run_id}-{writer}-{n:06d}.parquet"


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


@dataclass(frozen=True)
class CacheIndex:
    """The keys usable shards answer without an engine error (sorted, as bytes), for each the
    newest shard that does (an index into ``paths``), and the filesystem of the shards."""

    keys: np.ndarray
    shard: np.ndarray
    paths: list[str]
    fs: pafs.FileSystem | None

    def answers(self, keys: pa.Array) -> pa.Table:
        """The cached answers of ``keys`` (rows of ``RESPONSE_SCHEMA``, one per answered key),
        read from the shards that hold them and from no other."""
        if not len(self.keys) or not len(keys):
            return RESPONSE_SCHEMA.empty_table()
        wanted = _as_bytes(keys)
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        hit = self.keys[at] == wanted
        shard, hit_keys = self.shard[at[hit]], keys.filter(pa.array(hit))
        tables = [RESPONSE_SCHEMA.empty_table()]
        for s in np.unique(shard):
            rows = pq.read_table(self.paths[s], filesystem=self.fs, columns=RESPONSE_SCHEMA.names)
            need = hit_keys.filter(pa.array(shard == s))
            ok = pc.and_(
                pc.is_in(rows.column("request_key"), value_set=need), pc.is_null(rows.column("engine_error"))
            )
            tables.append(rows.filter(ok).cast(RESPONSE_SCHEMA))
        return pa.concat_tables(tables)


def index_ref(shards: list[str]):
    """The ``CacheIndex`` of ``shards``, built by a Ray task and left in the object store (an
    ObjectRef; None without shards): the driver never holds the keys."""
    if not shards:
        return None
    return _index_task().remote([storage.filesystem(s)[1] for s in shards], storage.filesystem(shards[0])[0])


@functools.cache
def _index_task():
    import ray

    return ray.remote(build_index)


def build_index(paths: list[str], fs: pafs.FileSystem | None) -> CacheIndex:
    """The ``CacheIndex`` of shards given oldest first (a later shard's answer wins)."""
    keys, shard = [np.array([], "S1")], [np.array([], np.int32)]
    for i, path in enumerate(paths):
        rows = pq.read_table(path, filesystem=fs, columns=["request_key", "engine_error"])
        answered = rows.filter(pc.is_null(rows.column("engine_error"))).column("request_key")
        keys.append(_as_bytes(answered))
        shard.append(np.full(len(answered), i, np.int32))
    every, of = np.concatenate(keys), np.concatenate(shard)
    order = np.lexsort((-of, every))  # by key, the newest shard first
    every, of = every[order], of[order]
    first = np.ones(len(every), bool)
    first[1:] = every[1:] != every[:-1]
    return CacheIndex(every[first], of[first], list(paths), fs)


def _as_bytes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(keys.to_numpy(zero_copy_only=False)).astype("S")


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
