"""How many partitions an article import run cuts its rows into (``jobs.articles_run``)."""

from pathlib import Path

import pytest

from jobs.articles_run import PART_BYTES, row_partitions
from udfs import storage


def _files(folder: Path, sizes: list[int]) -> list[str]:
    """Files of these sizes (sparse: a large one takes no disk), as URIs."""
    uris = []
    for i, size in enumerate(sizes):
        path = folder / f"in-{i}.warc.gz"
        with path.open("wb") as f:
            f.truncate(size)
        uris.append(storage.normalize_uri(str(path)))
    return uris


def test_a_small_run_gets_one_partition_per_core_not_four(tmp_path):
    # the sample WARC's size: before, max(4 × cores, files) cut its 39 records into 8 tasks
    assert row_partitions(_files(tmp_path, [1_058_972]), cores=2) == 2
    assert row_partitions(_files(tmp_path, [1_000, 2_000, 3_000]), cores=4) == 4


def test_a_run_grows_a_partition_per_part_bytes_up_to_four_per_core(tmp_path):
    assert row_partitions(_files(tmp_path, [5 * PART_BYTES + 1]), cores=2) == 6
    assert row_partitions(_files(tmp_path, [3 * PART_BYTES, 2 * PART_BYTES]), cores=2) == 5
    assert row_partitions(_files(tmp_path, [40 * PART_BYTES]), cores=2) == 8  # a big WARC: 4 × cores


def test_many_files_give_a_partition_each_without_reading_their_sizes(tmp_path):
    missing = [storage.normalize_uri(str(tmp_path / f"gone-{i}.warc.gz")) for i in range(9)]
    assert row_partitions(missing, cores=2) == 9  # no size asked: these files do not exist (it raises)
    assert row_partitions(missing[:8], cores=2) == 8


def test_size_is_the_stored_bytes_and_a_missing_file_has_none(tmp_path):
    (uri,) = _files(tmp_path, [12_345])
    assert storage.size(uri) == 12_345
    for absent in (
        storage.normalize_uri(str(tmp_path / "gone.warc.gz")),
        storage.normalize_uri(str(tmp_path)),
    ):
        with pytest.raises(FileNotFoundError, match="not a file"):
            storage.size(absent)
