"""The request cache of a stage: durable response shards under ``<stage>/responses/``.

Each shard is one Parquet file written atomically as soon as its responses arrive, named
``shard-<epoch ms>-<run id>-<n>.parquet`` so that the newest answer of a request wins when a
forced run answered it again. Engine errors (an outage, an out-of-memory batch, a prompt over the
length limit) stay in their shards as a record but are never served from the cache: a rerun
sends those requests again. A shard that cannot be read (a torn write, a truncated upload) is
logged, set aside as ``<name>.corrupt`` and its requests are computed again.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from udfs import storage
from udfs.llm_rows import RESPONSE_SCHEMA

log = logging.getLogger("augury.llm.cache")

_NAME = re.compile(r"shard-(\d{13})-")


def new_run_id() -> str:
    """Shard-name prefix of one run: its start time (for newest-wins ordering) and a random tag."""
    return f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"


def shard_uri(stage_uri: str, run_id: str, shard: int) -> str:
    return storage.join(stage_uri, "responses", f"shard-{run_id}-{shard:05d}.parquet")


def write_shard(stage_uri: str, run_id: str, shard: int, responses: pa.Table) -> None:
    storage.write_table(responses, shard_uri(stage_uri, run_id, shard))


def _age(uri: str) -> tuple[int, str]:
    """Sort key: the shard's run time (0 for shards named before times were recorded), then name."""
    name = uri.rsplit("/", 1)[-1]
    found = _NAME.match(name)
    return (int(found.group(1)) if found else 0, name)


def load_responses(stage_uri: str, wanted: set[str], stage: str) -> dict[str, dict]:
    """Answered responses on disk for the wanted request keys (the newest answer of each).

    A stage's shards hold every answer it ever gave (Daily Oracle's, every day built so far), so
    each shard is filtered in Arrow and only the wanted answers become Python rows."""
    keys = pa.array(sorted(wanted), pa.string())
    found: dict[str, dict] = {}
    for file in sorted(storage.list_files(storage.join(stage_uri, "responses"), ".parquet"), key=_age):
        try:
            table = storage.read_table(file, RESPONSE_SCHEMA)
        except (pa.ArrowInvalid, OSError) as exc:
            _set_aside(file, stage, exc)
            continue
        answered = pc.and_(
            pc.is_in(table.column("request_key"), keys), pc.is_null(table.column("engine_error"))
        )
        found.update((r["request_key"], r) for r in table.filter(answered).to_pylist())
    return found


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
