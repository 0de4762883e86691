"""What every test of a corpus job checks of a written table: the files, their partition
directories and the table read back match the declared schema exactly."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from udfs import storage
from udfs.schemas import TableSpec


def read_conforming(root: str, spec: TableSpec, file_nullability: bool = False) -> pa.Table:
    """The table under ``root``, after asserting that it has files, that each file holds the file
    schema's names and types in order (and its nullability flags too with ``file_nullability``:
    the article tables narrow them, the source tables leave Spark's) under exactly the table's
    partition directories, and that the table read back has the declared schema with no null in
    a non-null column."""
    files = storage.list_files(spec.uri(root), ".parquet")
    assert files, f"{spec.name}: no file written"
    for uri in files:
        schema = pq.read_schema(storage.local_path(uri)).remove_metadata()
        assert schema.names == spec.file_schema.names, uri
        assert schema.types == spec.file_schema.types, uri
        if file_nullability:
            assert schema.equals(spec.file_schema), (uri, schema)
        partitions = [part.split("=")[0] for part in uri.split("/") if "=" in part]
        assert partitions == list(spec.partition_cols), uri
    table = spec.read(root)
    assert table.schema.equals(spec.schema)
    for field in spec.schema:
        if not field.nullable:
            assert table.column(field.name).null_count == 0, field.name
    return table
