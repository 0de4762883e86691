"""jobs.task_parquet: an S3 root without s3a is written by the executors (real local Spark, moto
S3) and committed on the driver; read back by the executors; folder names as Spark's."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs import task_parquet
from jobs.spark import has_s3a, spark_schema, write_partitioned
from udfs import storage
from udfs.schemas import SOURCE_REJECTED, TableSpec

pytestmark = [pytest.mark.spark, pytest.mark.s3]

AWKWARD = ["plain", "a/b", "x=y", "50%", "it's", "tab\there", "ünï"]


def rejects(inputs: list[str | None], source: str = "wcep_html") -> list[dict]:
    return [
        {"item": f"item {n}", "reason": "parse_error", "detail": None, "source": source, "input": name}
        for n, name in enumerate(inputs)
    ]


def test_folders_are_named_as_spark_names_them(spark, tmp_path):
    rows = rejects(AWKWARD)
    spark.createDataFrame(rows, spark_schema(SOURCE_REJECTED)).write.partitionBy("source", "input").parquet(
        str(tmp_path / "spark")
    )
    by_spark = sorted(p.parent.name for p in (tmp_path / "spark").rglob("*.parquet"))
    ours = sorted(task_parquet.partition_folder(["input"], [r["input"]]) for r in rows)
    assert ours == by_spark
    assert task_parquet.partition_folder(["date"], [None]) == "date=__HIVE_DEFAULT_PARTITION__"
    assert task_parquet.partition_folder(["date"], [dt.date(2026, 6, 1)]) == "date=2026-06-01"


def test_executors_write_s3_without_s3a_and_replace_only_their_partitions(spark, s3_root):
    assert not has_s3a(spark)  # the path under test
    table = SOURCE_REJECTED.uri(s3_root)
    first = rejects(AWKWARD * 3)
    assert write_partitioned(
        spark.createDataFrame(first, spark_schema(SOURCE_REJECTED)), SOURCE_REJECTED, s3_root
    ) == len(first)
    back = SOURCE_REJECTED.read(s3_root)
    assert back.schema.equals(SOURCE_REJECTED.schema)
    assert sorted(back.column("input").to_pylist()) == sorted(r["input"] for r in first)
    for uri in storage.table_files(table):
        schema = pq.read_schema(storage.open_input(uri)).remove_metadata()
        assert schema.equals(SOURCE_REJECTED.file_schema), uri
    assert not [f for f in storage.list_files(table) if "_staging-" in f]

    # a rerun over two inputs replaces those two partitions and keeps the others
    again = rejects(["plain", "a/b"])
    write_partitioned(spark.createDataFrame(again, spark_schema(SOURCE_REJECTED)), SOURCE_REJECTED, s3_root)
    inputs = SOURCE_REJECTED.read(s3_root).column("input").to_pylist()
    assert inputs.count("plain") == inputs.count("a/b") == 1
    assert inputs.count("x=y") == 3 and len(inputs) == len(first) - 4

    # appending adds files beside the existing ones
    write_partitioned(
        spark.createDataFrame(again, spark_schema(SOURCE_REJECTED)), SOURCE_REJECTED, s3_root, append=True
    )
    assert SOURCE_REJECTED.read(s3_root).column("input").to_pylist().count("plain") == 2


def test_executors_read_columns_partitions_and_files_back(spark, s3_root):
    rows = rejects(["one", "one", "two", "three"])
    write_partitioned(spark.createDataFrame(rows, spark_schema(SOURCE_REJECTED)), SOURCE_REJECTED, s3_root)
    df = task_parquet.read(
        spark,
        SOURCE_REJECTED.uri(s3_root),
        SOURCE_REJECTED.schema,
        ["item", "input"],
        SOURCE_REJECTED.partition_cols,
        file_column="_file",
    )
    got = sorted((r["item"], r["input"], r["_file"].split("/")[-2]) for r in df.collect())
    assert got == sorted((r["item"], r["input"], f"input={r['input']}") for r in rows)
    one = [f for f in storage.table_files(SOURCE_REJECTED.uri(s3_root)) if "input=one" in f]
    only = task_parquet.read(
        spark,
        SOURCE_REJECTED.uri(s3_root),
        SOURCE_REJECTED.schema,
        ["item"],
        SOURCE_REJECTED.partition_cols,
        files=one,
    )
    assert sorted(r["item"] for r in only.collect()) == ["item 0", "item 1"]


def staged_file(fs, base: str, write_id: str, folder: str, name: str, rows: int) -> None:
    path = f"{base}/{task_parquet.STAGING.format(write_id)}/{folder}/{name}"
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    table = pa.table({"item": [f"r{n}" for n in range(rows)]})
    with fs.open_output_stream(path) as out:
        pq.write_table(table, out)


SPEC = TableSpec("t", "corpus/t", pa.schema([("item", pa.string()), ("k", pa.string())]), ("k",))


def test_commit_takes_only_the_reported_attempts_files(s3_root):
    """A task that failed (or lost to a speculative copy) after writing leaves its file in
    staging; only the attempt Spark accepted is reported, so only its rows reach the table."""
    uri = SPEC.uri(s3_root)
    fs, base = storage.filesystem(uri)
    staged_file(fs, base, "w1", "k=a", "part-w1-00000-5-0.parquet", 3)  # the failed attempt
    staged_file(fs, base, "w1", "k=a", "part-w1-00000-7-0.parquet", 3)  # the accepted one
    report = {"partition": 0, "attempt": 7, "folder": "k=a", "name": "part-w1-00000-7-0.parquet", "rows": 3}
    assert task_parquet.commit(uri, "w1", [report], append=False) == 3
    assert [f.rsplit("/", 1)[1] for f in storage.table_files(uri)] == ["part-w1-00000-7-0.parquet"]
    assert storage.count_rows(uri) == 3


def test_a_commit_that_lands_fewer_rows_than_written_is_an_error(s3_root):
    uri = SPEC.uri(s3_root)
    fs, base = storage.filesystem(uri)
    staged_file(fs, base, "w2", "k=a", "part-w2-00000-1-0.parquet", 2)
    report = {"partition": 0, "attempt": 1, "folder": "k=a", "name": "part-w2-00000-1-0.parquet", "rows": 5}
    with pytest.raises(task_parquet.WriteError, match="the tasks wrote 5 rows, the committed files hold 2"):
        task_parquet.commit(uri, "w2", [report], append=False)
