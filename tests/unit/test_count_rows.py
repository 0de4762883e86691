"""Counting a Parquet table's rows from its footers: what counts as the table's files, and the
count costs no memory per file (a dataset's own count kept ~50 KB of metadata per file)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from udfs import storage


def _write(path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {"x": list(range(rows))} | {f"c{i}": ["text"] * rows for i in range(20)}
    pq.write_table(pa.table(columns), path)


def test_rows_are_counted_from_the_table_files_only(tmp_path):
    table = tmp_path / "articles"
    _write(table / "published_date=2024-01-01" / "part-0.parquet", 3)
    _write(table / "published_date=2024-01-02" / "part-0.parquet", 4)
    _write(table / "published_date=__HIVE_DEFAULT_PARTITION__" / "part-0.parquet", 2)
    _write(table / "_staging" / "part-0.parquet", 50)  # not the table's, as for a dataset
    _write(table / "published_date=2024-01-02" / ".part-1.parquet", 60)
    (table / "_SUCCESS.json").write_text("{}")
    assert storage.count_rows(str(table), filter=ds.field("x") >= 3) == 1
    (table / "published_date=2024-01-01" / "part-9.parquet.corrupt").write_bytes(b"torn")
    assert storage.count_rows(str(table)) == 9
    assert storage.count_rows(str(table / "published_date=2024-01-02" / "part-0.parquet")) == 4
    assert storage.count_rows(str(tmp_path / "absent")) == 0


def _rss_kb() -> int:
    with Path("/proc/self/status").open() as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


def test_counting_many_files_keeps_no_metadata_per_file(tmp_path):
    table = tmp_path / "articles"
    for day in range(600):
        _write(table / f"published_date={day:04d}" / "part-0.parquet", 2)
    before = _rss_kb()
    assert storage.count_rows(str(table)) == 1200
    grown = _rss_kb() - before
    assert grown < 8 * 1024, f"counting 600 files grew the process by {grown} KB"
