"""The request cache of a stage: durable response shards under ``<stage>/responses/``.

Ray Data writes each shard (``write_parquet``) as its responses arrive, named
``shard-<epoch ms>-<run id>-<n>.parquet`` so that the newest answer of a request wins when a
forced run answered it again. Engine errors (an outage, an out-of-memory batch, a prompt over the
length limit) stay in their shards as a record but are never served from the cache: a rerun
sends those requests again. A shard that cannot be read (a torn write, a truncated upload) is
logged, set aside as ``<name>.corrupt`` and its requests are computed again.

The cache is consulted by sorting, never by looking keys up shard by shard: the stage's requests
are sorted by key together with marker rows of the keys the shards answer (``answered_markers``,
``unique_requests``), and its (unit, request) pairs together with the shards' rows
(``served``, ``attach_answers``). Each shard is read once per step, whatever the stage's size.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines.llm.render import COPIES, ROW, SAMPLE
from udfs import storage
from udfs.llm_rows import REQUEST_SCHEMA, RESPONSE_SCHEMA

log = logging.getLogger("augury.llm.cache")

_NAME = re.compile(r"shard-(\d{13})-")
CACHED = "__cached"  # of a unique request: 1 when a usable shard answers it
AGE, FRESH = "__age", "__fresh"  # of a shard's row: the shard's place, oldest first; written this run
MARKER = -1  # the position (``__row``) of a row that is a shard's, not a unit's
JOIN_SCHEMA = pa.schema(
    [pa.field(ROW, pa.int64()), pa.field(SAMPLE, pa.int32()), *RESPONSE_SCHEMA, pa.field(AGE, pa.int64())]
)


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


def answered_markers(shard_rows: pa.Table) -> pa.Table:
    """Marker rows, in the requests' schema, for the keys shard rows answer without an engine
    error: sorted together with a stage's requests they mark the cached ones
    (``unique_requests``). A marker's position (``__row``) is −1."""
    keys = shard_rows.filter(pc.is_null(shard_rows.column("engine_error"))).column("request_key")
    n = len(keys)
    columns = {"request_key": keys, "prompt_text": pa.repeat("", n), "mode": pa.repeat("", n)}
    table = pa.table(
        [columns.get(f.name, pa.nulls(n, f.type)) for f in REQUEST_SCHEMA], schema=REQUEST_SCHEMA
    )
    return table.append_column(ROW, pa.repeat(MARKER, n))


def unique_requests(block: pa.Table) -> pa.Table:
    """One request per key, with its number of copies (``__copies``) and whether a shard answers
    it (``__cached``: a marker row of that key). Called per block of requests and markers sorted
    by key, so every copy of a key is in the block; the copy from the earliest input row wins."""
    is_marker = pc.equal(block.column(ROW), MARKER)
    cached = pc.unique(block.filter(is_marker).column("request_key"))
    requests = block.filter(pc.invert(is_marker))
    order = [("request_key", "ascending"), (ROW, "ascending")]
    ordered = requests.take(pc.sort_indices(requests, order)).drop_columns([ROW])
    keys = ordered.column("request_key").combine_chunks()
    if not len(keys):
        ordered = ordered.append_column(COPIES, pa.array([], pa.int64()))
        return ordered.append_column(CACHED, pa.array([], pa.int8()))
    first = _first_of_runs(keys)
    starts = pc.indices_nonzero(first)
    ends = pa.concat_arrays([starts.slice(1), pa.array([len(keys)], pa.uint64())])
    unique = ordered.filter(first).append_column(COPIES, pc.subtract(ends, starts).cast(pa.int64()))
    answered = pc.is_in(unique.column("request_key"), value_set=cached)
    return unique.append_column(CACHED, answered.cast(pa.int8()))


def _first_of_runs(keys: pa.Array) -> pa.BooleanArray:
    """Of sorted ``keys``: true where a run of equal keys starts."""
    if not len(keys):
        return pa.array([], pa.bool_())
    return pa.concat_arrays([pa.array([True]), pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))])


def served(shard_rows: pa.Table) -> pa.Table:
    """Shard rows (with their shard's ``__age`` and ``__fresh``) the cache may serve, as answer
    rows of the join schema (position −1): an engine error only from this run's shards (it is
    the row's outcome, never a cached answer)."""
    ok = pc.or_(pc.is_null(shard_rows.column("engine_error")), shard_rows.column(FRESH))
    rows = shard_rows.filter(ok).drop_columns([FRESH])
    n = rows.num_rows
    rows = rows.append_column(ROW, pa.repeat(MARKER, n)).append_column(
        SAMPLE, pa.repeat(-1, n).cast(pa.int32())
    )
    return rows.select(JOIN_SCHEMA.names).cast(JOIN_SCHEMA)


def attach_answers(block: pa.Table) -> pa.Table:
    """The (unit, request) pairs of a block (join schema) with the newest answer of their key
    filled in (``__age`` null: none). Called per block of pairs and answers sorted by key, so
    every answer of a pair's key is in the block."""
    is_answer = pc.equal(block.column(ROW), MARKER)
    answers = block.filter(is_answer)
    newest = pc.sort_indices(answers, [("request_key", "ascending"), (AGE, "descending")])
    answers = answers.take(newest)
    answers = answers.filter(_first_of_runs(answers.column("request_key").combine_chunks()))
    pairs = block.filter(pc.invert(is_answer))
    found = answers.take(pc.index_in(pairs.column("request_key"), value_set=answers.column("request_key")))
    own = [ROW, SAMPLE, "request_key"]
    return pa.table(
        [pairs.column(c) if c in own else found.column(c) for c in JOIN_SCHEMA.names], schema=JOIN_SCHEMA
    )


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
