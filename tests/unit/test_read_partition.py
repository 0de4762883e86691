"""Reading one partition of a table from its own directory: the same rows as a filtered read of
the whole table, and a loop over many partitions keeps no metadata per file (a dataset reused
for such a loop kept ~70 KB a file)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from udfs.schemas import HIVE_NULL, TableSpec

SPEC = TableSpec(
    name="things",
    path="corpus/things",
    schema=pa.schema(
        [("thing_id", pa.string()), ("published_date", pa.date32())]
        + [(f"c{i}", pa.string()) for i in range(20)]
    ),
    partition_cols=("published_date",),
)
DAY0 = dt.date(2024, 1, 1)


def _write(root: Path, day: dt.date | None, rows: int) -> None:
    key = day.isoformat() if day else "__HIVE_DEFAULT_PARTITION__"
    path = root / SPEC.path / f"published_date={key}" / "part-0.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {"thing_id": [f"{key}-{i}" for i in range(rows)]}
    pq.write_table(pa.table(columns | {f"c{i}": ["text"] * rows for i in range(20)}), path)


def test_one_partition_reads_as_the_filtered_table(tmp_path):
    for n, day in enumerate((DAY0, DAY0 + dt.timedelta(days=1), None), start=2):
        _write(tmp_path, day, n)
    root = str(tmp_path)
    whole = SPEC.dataset(root).to_table(filter=pc.field("published_date") == pa.scalar(DAY0, pa.date32()))
    assert SPEC.read_partition(root, DAY0).equals(whole)
    assert SPEC.read_partition(root, DAY0).num_rows == 2
    assert SPEC.read_partition(root, DAY0.isoformat()).equals(whole)  # the directory's own spelling
    assert SPEC.read_partition(root, DAY0, ["c3", "thing_id"]).column_names == ["c3", "thing_id"]
    one = SPEC.read_partition(root, DAY0, ["thing_id"], pc.field("thing_id") == "2024-01-01-1")
    assert one["thing_id"].to_pylist() == ["2024-01-01-1"]
    undated = SPEC.read_partition(root, HIVE_NULL)
    assert undated["thing_id"].to_pylist() == [f"{HIVE_NULL}-{i}" for i in range(4)]
    assert undated["published_date"].null_count == 4  # as the filtered read gives them
    absent = SPEC.read_partition(root, DAY0 - dt.timedelta(days=1))
    assert absent.num_rows == 0 and absent.schema.names == SPEC.schema.names


def _rss_kb() -> int:
    with Path("/proc/self/status").open() as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


def test_a_loop_over_many_partitions_keeps_no_metadata_per_file(tmp_path):
    days = [DAY0 + dt.timedelta(days=i) for i in range(600)]
    for day in days:
        _write(tmp_path, day, 2)
    SPEC.read_partition(str(tmp_path), days[0])  # the reader's own one-time allocations
    before = _rss_kb()
    assert sum(SPEC.read_partition(str(tmp_path), day).num_rows for day in days) == 1200
    grown = _rss_kb() - before
    assert grown < 8 * 1024, f"reading 600 partitions one at a time grew the process by {grown} KB"
