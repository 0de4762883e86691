"""jobs.ingest_wikipedia on inputs built for it: a multistream dump split over every core (with
its index beside it or among the inputs), a damaged stream, files that hold no page, pages with
no text, and option values refused before any work."""

from __future__ import annotations

import bz2
import random
from collections import Counter
from pathlib import Path

import pytest

from jobs import ingest_wikipedia
from jobs.ingest_wikipedia import CHUNKS_PER_CORE, Config, main, run
from tests.unit.test_wikidump import page
from tests.warc_fixtures import record
from udfs import wikidump
from udfs.schemas import SOURCE_REJECTED, WIKI_PAGES

pytestmark = pytest.mark.spark
PAGES, PER_STREAM = 300, 10
STEM = "enwiki-20240601-pages-articles-multistream"


def write_dump(folder: Path, index_folder: Path | None = None) -> tuple[Path, Path, list[int]]:
    """A multistream dump of PAGES pages and its index (beside it unless ``index_folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / f"{STEM}.xml.bz2"
    index = (index_folder or folder) / f"{STEM}-index.txt.bz2"
    index.parent.mkdir(parents=True, exist_ok=True)
    with dump.open("wb") as d, index.open("wb") as i:
        wikidump.write_multistream(((1000 + n, f"Page {n}", page(n)) for n in range(PAGES)), d, i, PER_STREAM)
    with bz2.open(index, "rt") as lines:
        return dump, index, wikidump.stream_offsets(lines)


def tables(root: Path) -> tuple[list[dict], list[dict]]:
    return WIKI_PAGES.read(str(root)).to_pylist(), SOURCE_REJECTED.read(str(root)).to_pylist()


def test_a_multistream_dump_is_parsed_in_chunks_and_yields_every_page(spark, tmp_path):
    dump, _, _ = write_dump(tmp_path / "in")
    pages, _ = run(Config(root=str(tmp_path / "out"), dumps=[str(dump)]), spark)
    cores = spark.sparkContext.defaultParallelism
    assert pages.metrics["chunks (tasks)"] == CHUNKS_PER_CORE * cores
    written, rejected = tables(tmp_path / "out")
    assert sorted(p["page_id"] for p in written) == list(range(1000, 1000 + PAGES)) and not rejected
    assert {p["dump"] for p in written} == {STEM} and pages.reconciles


def test_an_index_among_the_inputs_is_used_and_is_no_dump(spark, tmp_path):
    dump, index, _ = write_dump(tmp_path / "in", tmp_path / "indexes")
    alone, _ = run(Config(root=str(tmp_path / "alone"), dumps=[str(dump)]), spark)
    assert alone.metrics["chunks (tasks)"] == 1  # no index beside it: one task
    split, _ = run(Config(root=str(tmp_path / "split"), dumps=[str(dump), str(index)]), spark)
    assert split.metrics["chunks (tasks)"] > 1 and split.metrics["dumps"] == 1
    key = sorted((p["page_id"], p["lead"]) for p in tables(tmp_path / "split")[0])
    assert key == sorted((p["page_id"], p["lead"]) for p in tables(tmp_path / "alone")[0])


def test_a_damaged_stream_costs_only_its_own_pages(spark, tmp_path):
    dump, _, offsets = write_dump(tmp_path / "in")
    data = bytearray(dump.read_bytes())
    middle = (offsets[7] + offsets[8]) // 2
    data[middle : middle + 24] = bytes(24)
    dump.write_bytes(bytes(data))
    pages, _ = run(Config(root=str(tmp_path / "out"), dumps=[str(dump)]), spark)
    written, rejected = tables(tmp_path / "out")
    lost = set(range(1000 + 7 * PER_STREAM, 1000 + 8 * PER_STREAM))
    assert {p["page_id"] for p in written} == set(range(1000, 1000 + PAGES)) - lost
    ((reason, detail),) = [(r["reason"], r["detail"]) for r in rejected]
    assert reason == "damaged_file" and f"stream at byte {offsets[7]}" in detail
    assert pages.reconciles and pages.rows_written == PAGES - PER_STREAM


def test_files_without_pages_and_pages_without_text_are_rejected_rows(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "random.xml.bz2").write_bytes(random.Random(5).randbytes(4000))
    (folder / "empty.xml").write_bytes(b"")
    (folder / "no-pages.xml").write_bytes(
        b"<mediawiki><siteinfo><sitename>W</sitename></siteinfo></mediawiki>"
    )
    (folder / "crawl.warc.gz").write_bytes(record("https://example.com/a"))
    deleted = b'<page><title>Gone</title><ns>0</ns><id>5</id><revision><id>9</id><text deleted="deleted" /></revision></page>'
    missing = b"<page><title>No text</title><ns>0</ns><id>6</id><revision><id>9</id></revision></page>"
    (folder / "textless.xml").write_bytes(b"<mediawiki>" + deleted + missing + page(1) + b"</mediawiki>")
    pages, _ = run(
        Config(root=str(tmp_path / "out"), dumps=[str(p) for p in sorted(folder.iterdir())]), spark
    )
    written, rejected = tables(tmp_path / "out")
    assert [p["title"] for p in written] == ["Page 1"]
    assert Counter((r["input"], r["reason"]) for r in rejected) == Counter(
        {
            ("random", "unreadable_file"): 1,
            ("empty", "no_pages"): 1,
            ("no-pages", "no_pages"): 1,
            ("crawl.warc", "no_pages"): 1,
            ("textless", "no_text"): 2,
        }
    )
    details = {r["item"]: r["detail"] for r in rejected if r["reason"] == "no_text"}
    assert details == {"Gone": "the revision text was deleted", "No text": "no <text> element"}
    assert pages.rows_read == 7 and pages.reconciles


def test_bad_options_end_in_one_line_before_any_work(tmp_path, capsys):
    a_file = tmp_path / "root.txt"
    a_file.write_text("x")
    for argv, expected in [
        (["--root", str(a_file), str(tmp_path / "d.xml")], "is a file"),
        (["--root", str(tmp_path / "out"), str(tmp_path / "missing-*.xml.bz2")], "missing-"),
        (["--root", str(tmp_path / "out")], "required"),
    ]:
        with pytest.raises(SystemExit) as done:
            main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2 and expected in err and "Traceback" not in err


def test_an_index_that_does_not_fit_its_dump_is_refused(spark, tmp_path):
    dump, index, _ = write_dump(tmp_path / "in")
    dump.write_bytes(dump.read_bytes()[:1000])
    with pytest.raises(ingest_wikipedia.InputError, match="past the end"):
        run(Config(root=str(tmp_path / "out"), dumps=[str(dump)]), spark)
    index.write_bytes(bz2.compress(b"not an index\n"))
    with pytest.raises(ingest_wikipedia.InputError, match="cannot be read"):
        run(Config(root=str(tmp_path / "out"), dumps=[str(dump)]), spark)
