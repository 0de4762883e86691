import datetime as dt
import pickle
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from udfs import storage
from udfs.schemas import ARTICLES


def _articles(dates):
    n = len(dates)
    cols = {f.name: pa.nulls(n, f.type) for f in ARTICLES.schema}
    cols["article_id"] = pa.array([f"id{i}" for i in range(n)])
    cols["url"] = cols["canonical_url"] = pa.array([f"https://x.org/{i}" for i in range(n)])
    cols["text"] = pa.array(["t"] * n)
    cols["n_chars"] = pa.array([1] * n, pa.int32())
    cols["text_hash"] = pa.array([f"h{i}" for i in range(n)])
    cols["extractor"] = pa.array(["trafilatura"] * n)
    cols["published_date"] = pa.array(dates, pa.date32())
    return pa.table(cols, schema=ARTICLES.schema)


def test_partition_replacement_is_exact(tmp_path):
    uri = ARTICLES.uri(str(tmp_path))
    d1, d2 = dt.date(2022, 9, 15), dt.date(2022, 9, 16)
    storage.write_dataset(_articles([d1, d1, d2, None]), uri, ARTICLES.partition_cols)
    storage.write_dataset(_articles([d2]), uri, ARTICLES.partition_cols)  # rerun producing only d2
    back = ARTICLES.read(str(tmp_path))
    counts = {}
    for d in back.column("published_date").to_pylist():
        counts[d] = counts.get(d, 0) + 1
    assert counts == {d1: 2, d2: 1, None: 1}
    assert back.schema.equals(ARTICLES.schema)


def test_missing_table_reads_empty_with_schema(tmp_path):
    assert ARTICLES.read(str(tmp_path)).num_rows == 0


def test_expand_inputs_globs_manifest_and_errors(tmp_path):
    for name in ("a.warc.gz", "b.warc.gz", "c.txt"):
        (tmp_path / name).write_bytes(b"x")
    manifest = tmp_path / "list.txt"
    manifest.write_text(f"# comment\n{tmp_path / 'c.txt'}\n")
    got = storage.expand_inputs([str(tmp_path / "*.warc.gz")], manifest=str(manifest))
    assert [g.rsplit("/", 1)[1] for g in got] == ["a.warc.gz", "b.warc.gz", "c.txt"]
    with pytest.raises(FileNotFoundError):
        storage.expand_inputs([str(tmp_path / "nothing-*.warc.gz")])


@pytest.mark.s3
def test_s3_round_trip_keeps_partitions(s3_root):
    uri = ARTICLES.uri(s3_root)
    storage.write_dataset(_articles([dt.date(2022, 9, 15), None]), uri, ARTICLES.partition_cols)
    assert storage.exists(uri)
    back = ARTICLES.read(s3_root)
    assert sorted(back.column("published_date").to_pylist(), key=str) == [dt.date(2022, 9, 15), None]
    storage.mark_done(uri, {"rows": 2})
    assert storage.is_done(uri) and storage.read_marker(uri)["rows"] == 2


def test_s3_calls_in_a_process_share_one_client_per_set_of_options(s3_root, monkeypatch):
    """A new S3 filesystem builds a botocore client (about a quarter of a CPU-second): the calls
    of one process, its thread pools' and a task's unpickled copy of a filesystem reuse the one
    their options made; other credentials get their own."""
    first = storage.filesystem(s3_root)[0].handler.fs
    storage.write_bytes(storage.join(s3_root, "x"), b"1")
    assert storage.filesystem(storage.join(s3_root, "x"))[0].handler.fs is first
    with ThreadPoolExecutor(2) as pool:
        assert set(pool.map(lambda _: storage.filesystem(s3_root)[0].handler.fs, range(4))) == {first}
    with storage.open_input(storage.join(s3_root, "x")) as f:
        assert f.fs is first
    assert pickle.loads(pickle.dumps(storage.filesystem(s3_root)[0])).handler.fs is first
    monkeypatch.setenv("AWS_SESSION_TOKEN", "another")
    assert storage.filesystem(s3_root)[0].handler.fs is not first


@pytest.mark.s3
def test_gz_files_round_trip_as_stored_bytes(tmp_path, s3_root):
    import gzip

    data = gzip.compress(b"line one\nline two\n")
    for root in (str(tmp_path), s3_root):
        uri = storage.join(root, "raw", "x.jsonl.gz")
        storage.write_bytes(uri, data)
        assert storage.read_bytes(uri) == data  # neither gzipped twice nor silently decompressed
