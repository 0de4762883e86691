"""One root URI for every output, and the Python-side I/O beneath it.

A root is a local path, a ``file://`` URI or an ``s3://`` / ``s3a://`` URI. Everything the
project writes lives under it (``corpus/…``, ``<builder>/<stage>/…``, ``benchmarks/…``).
Python reads and writes through pyarrow; S3 goes through s3fs wrapped as a pyarrow filesystem,
so an S3-compatible endpoint (MinIO, moto) is picked up from ``AWS_ENDPOINT_URL`` like any
other boto client. Nothing here imports Spark or Ray.
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

MARKER = "_SUCCESS.json"


def normalize_uri(uri: str) -> str:
    """Return ``file:///abs/path`` for local paths and ``s3://bucket/key`` for S3 (s3a/s3n folded)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("s3", "s3a", "s3n"):
        return "s3://" + parsed.netloc + parsed.path.rstrip("/")
    if parsed.scheme == "file":
        return "file://" + str(Path(parsed.path).resolve())
    if parsed.scheme:
        raise ValueError(
            f"unsupported URI scheme {parsed.scheme!r} in {uri!r} (use a path, file:// or s3://)"
        )
    return "file://" + str(Path(uri).resolve())


def is_s3(uri: str) -> bool:
    return normalize_uri(uri).startswith("s3://")


def join(uri: str, *parts: str) -> str:
    """Join path segments onto a URI without touching the scheme."""
    base = normalize_uri(uri)
    return base.rstrip("/") + "/" + posixpath.join(*(p.strip("/") for p in parts if p))


def local_path(uri: str) -> str:
    """The filesystem path of a local URI (raises for S3)."""
    norm = normalize_uri(uri)
    if not norm.startswith("file://"):
        raise ValueError(f"{uri!r} is not a local path")
    return norm[len("file://") :]


def s3_filesystem_options() -> dict[str, Any]:
    """Options for s3fs: honour ``AWS_ENDPOINT_URL`` (MinIO, moto) and never cache listings.
    Keys given in the environment are passed explicitly, so a filesystem pickled to a Ray or
    Spark worker reaches S3 as the driver does, whatever the worker's environment. fsspec's
    instance cache gives a process one filesystem per set of options, shared by its threads: a
    new one builds a botocore client (S3's service model parsed, TLS contexts made), about a
    quarter of a CPU-second, more than the small requests most calls here make."""
    options: dict[str, Any] = {"use_listings_cache": False}
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["client_kwargs"] = {"endpoint_url": endpoint}
    for env, key in (
        ("AWS_ACCESS_KEY_ID", "key"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "token"),
    ):
        if os.environ.get(env):
            options[key] = os.environ[env]
    return options


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it for ``uri``."""
    norm = normalize_uri(uri)
    if norm.startswith("s3://"):
        import s3fs

        fs = pafs.PyFileSystem(pafs.FSSpecHandler(s3fs.S3FileSystem(**s3_filesystem_options())))
        return fs, norm[len("s3://") :]
    return pafs.LocalFileSystem(), norm[len("file://") :]


def exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type == pafs.FileType.Directory


def is_file(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type == pafs.FileType.File


def size(uri: str) -> int:
    """Bytes of the file at ``uri`` (as stored: compressed files are not opened); a missing file
    or a directory is a ``FileNotFoundError``, never a size of 0."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(f"not a file: {uri}")
    return info.size


def delete(uri: str) -> None:
    """Remove a file or a directory tree if it exists."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        fs.delete_file(path)


def list_files(uri: str, suffix: str = "") -> list[str]:
    """Every file below ``uri`` whose name ends with ``suffix``, as URIs, sorted."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    scheme = "s3://" if normalize_uri(uri).startswith("s3://") else "file://"
    return sorted(scheme + i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix))


def read_bytes(uri: str) -> bytes:
    fs, path = filesystem(uri)
    with fs.open_input_stream(path, compression=None) as f:  # bytes as stored, even for *.gz
        return f.read()


def write_bytes(uri: str, data: bytes) -> None:
    """Write a whole file; on local disk the write is atomic (temp file + rename)."""
    fs, path = filesystem(uri)
    fs.create_dir(posixpath.dirname(path), recursive=True)
    if isinstance(fs, pafs.LocalFileSystem):
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        with fs.open_output_stream(tmp, compression=None) as f:
            f.write(data)
        fs.move(tmp, path)
    else:
        with fs.open_output_stream(path, compression=None) as f:  # never gzip *.gz a second time
            f.write(data)


def write_json(uri: str, obj: Any) -> None:
    write_bytes(uri, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def read_json(uri: str) -> Any:
    return json.loads(read_bytes(uri))


def write_table(table: pa.Table, uri: str) -> None:
    """Write one Parquet file (atomically on local disk)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_bytes(uri, sink.getvalue().to_pybytes())


def _hive(schema: pa.Schema | None, partition_cols: Sequence[str]) -> ds.Partitioning | None:
    if not partition_cols:
        return None
    if schema is None:
        raise ValueError("a schema is needed to type the partition columns")
    return ds.partitioning(pa.schema([schema.field(c) for c in partition_cols]), flavor="hive")


def write_dataset(
    table: pa.Table,
    uri: str,
    partition_cols: Sequence[str] = (),
    replace: str = "partitions",
) -> None:
    """Write ``table`` as Parquet under ``uri``, hive-partitioned by ``partition_cols``.

    ``replace="partitions"`` replaces exactly the partitions present in ``table`` and keeps the
    others (idempotent reruns); ``replace="all"`` replaces the whole table.
    """
    if replace not in ("partitions", "all"):
        raise ValueError("replace must be 'partitions' or 'all'")
    fs, path = filesystem(uri)
    if (replace == "all" or not partition_cols) and fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)
    fs.create_dir(path, recursive=True)
    ds.write_dataset(
        table,
        path,
        filesystem=fs,
        format="parquet",
        partitioning=_hive(table.schema, partition_cols),
        existing_data_behavior="delete_matching",
        basename_template=f"part-{uuid.uuid4().hex[:12]}-{{i}}.parquet",
        max_rows_per_group=64 * 1024,
    )


def read_table(
    uri: str,
    schema: pa.Schema | None = None,
    partition_cols: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    filter: ds.Expression | None = None,
) -> pa.Table:
    """Read a (possibly hive-partitioned) Parquet table; an absent table reads as empty."""
    dataset = open_dataset(uri, schema, partition_cols)
    return dataset.to_table(columns=list(columns) if columns else None, filter=filter)


def open_dataset(uri: str, schema: pa.Schema | None = None, partition_cols: Sequence[str] = ()) -> ds.Dataset:
    """A (possibly hive-partitioned) Parquet table as a dataset: its files are listed once, then
    each read (a day's partition, a projection) touches only what it needs. An absent table is an
    empty dataset."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        if schema is None:
            raise FileNotFoundError(uri)
        return ds.dataset(schema.empty_table())
    return ds.dataset(
        path,
        filesystem=fs,
        format="parquet",
        schema=schema,
        partitioning=_hive(schema, partition_cols) if partition_cols else "hive",
    )


def partition_values(dataset: ds.Dataset, column: str) -> set[Any]:
    """The values of partition column ``column`` that have files (from directory names; no row is
    read). The null partition is left out."""
    keys = (ds.get_partition_keys(f.partition_expression) for f in dataset.get_fragments())
    return {k[column] for k in keys if k.get(column) is not None}


def table_files(uri: str) -> list[str]:
    """The Parquet data files of a table (or the file ``uri`` itself), as URIs, sorted: files and
    folders named ``_…`` or ``.…`` are not the table's (a writer's staging, markers), as for a
    dataset."""
    fs, path = filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return []
    scheme = "s3://" if normalize_uri(uri).startswith("s3://") else "file://"
    if info.type == pafs.FileType.File:
        return [scheme + info.path]
    found = []
    for file in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        hidden = any(part[:1] in "._" for part in file.path[len(path) :].split("/") if part)
        if file.type == pafs.FileType.File and file.path.endswith(".parquet") and not hidden:
            found.append(scheme + file.path)
    return sorted(found)


def count_rows(uri: str, filter: ds.Expression | None = None) -> int:
    """Rows of a Parquet table (``table_files``) from its file footers (no data is read), one
    file at a time: a dataset's own count keeps every fragment's metadata, about 50 KB a file;
    0 when absent. With a ``filter``, the rows that match it: only the filter's columns are
    read, batch by batch."""
    fs, path = filesystem(uri)
    if filter is not None:
        if fs.get_file_info(path).type == pafs.FileType.NotFound:
            return 0
        return ds.dataset(path, filesystem=fs, format="parquet", partitioning="hive").count_rows(
            filter=filter
        )
    return footer_rows(table_files(uri))


def footer_rows(files: Sequence[str]) -> int:
    """Rows of Parquet files (URIs on one filesystem) from their footers, a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    if not files:
        return 0
    fs, _ = filesystem(files[0])

    def rows(uri: str) -> int:
        with fs.open_input_file(normalize_uri(uri).split("://", 1)[1]) as f:
            return pq.read_metadata(f).num_rows

    with ThreadPoolExecutor(8) as pool:
        return sum(pool.map(rows, files))


def mark_done(uri: str, summary: dict[str, Any]) -> None:
    """Write the completion marker of a table or stage directory."""
    write_json(join(uri, MARKER), summary)


def is_done(uri: str) -> bool:
    return exists(join(uri, MARKER))


def read_marker(uri: str) -> dict[str, Any]:
    return read_json(join(uri, MARKER))


def upload_tree(local_dir: str, uri: str, replace_subdirs: Iterable[str] | None = None) -> int:
    """Copy a local directory tree to ``uri``; returns the number of files copied.

    ``replace_subdirs`` (relative paths, e.g. partition directories) are deleted at the
    destination first, so a rerun replaces exactly those partitions.
    """
    dest_fs, dest_path = filesystem(uri)
    for sub in replace_subdirs or ():
        target = posixpath.join(dest_path, sub)
        if dest_fs.get_file_info(target).type == pafs.FileType.Directory:
            dest_fs.delete_dir(target)
    copied = 0
    root = Path(local_dir)
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if rel.startswith(".") or "/." in rel or rel.endswith(".crc"):
            continue
        target = posixpath.join(dest_path, rel)
        dest_fs.create_dir(posixpath.dirname(target), recursive=True)
        with file.open("rb") as src, dest_fs.open_output_stream(target, compression=None) as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
        copied += 1
    return copied


def download_tree(uri: str, local_dir: str) -> int:
    """Copy every file below ``uri`` into ``local_dir`` (streamed); returns the number of files
    (0 when ``uri`` is no directory)."""
    fs, path = filesystem(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return 0
    copied = 0
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        target = Path(local_dir) / info.path[len(path) :].lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(info.path, compression=None) as src, target.open("wb") as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
        copied += 1
    return copied


def open_input(uri: str):
    """A binary file object for reading ``uri`` (local or S3), streamed rather than loaded."""
    import fsspec

    norm = normalize_uri(uri)
    if norm.startswith("s3://"):
        return fsspec.open(norm, "rb", **s3_filesystem_options()).open()
    return Path(norm[len("file://") :]).open("rb")


def expand_inputs(patterns: Sequence[str], manifest: str | None = None) -> list[str]:
    """Resolve paths, globs (local or S3) and an optional manifest file (one path or glob per
    line, ``#`` comments) to a sorted, de-duplicated list of file URIs. A pattern that matches
    nothing raises, so a typo never turns into an empty run."""
    import fsspec

    items = list(patterns)
    if manifest:
        lines = read_bytes(manifest).decode("utf-8").splitlines()
        items += [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    found: set[str] = set()
    for item in items:
        norm = normalize_uri(item)
        if norm.startswith("s3://"):
            fs = fsspec.filesystem("s3", **s3_filesystem_options())
            matches = (
                ["s3://" + m for m in fs.glob(norm[len("s3://") :])] if any(c in norm for c in "*?[") else []
            )
            if not matches and fs.exists(norm[len("s3://") :]):
                matches = [norm]
        else:
            path = norm[len("file://") :]
            if any(c in path for c in "*?["):
                matches = ["file://" + str(p) for p in sorted(Path("/").glob(path.lstrip("/")))]
            elif Path(path).is_dir():
                matches = ["file://" + str(p) for p in sorted(Path(path).iterdir()) if p.is_file()]
            else:
                matches = [norm] if Path(path).exists() else []
        if not matches:
            raise FileNotFoundError(f"input {item!r} matches no file")
        found.update(matches)
    return sorted(found)
