"""Pages per second per core: the ingest_wikipedia Spark job against a plain mwparserfromhell loop.

    python -m bench.ingest_wikipedia [--pages 2400]

Input: a multistream dump and its index, written under a temporary directory the way Wikimedia
packs them (100 pages per bz2 stream) from the 32 real pages of the two sample dumps, repeated
with fresh ids and titles up to ``--pages`` pages, so that JVM start-up and task scheduling are
amortised.

Measured in one process:

* **job**: ``jobs.ingest_wikipedia.run`` on the dump, Spark ``local[*]``: the dump is split by its
  index over every core; each page gets plain text, sections and categories (and portal day
  pages their events) and is written to ``wiki_pages``. Wall time of ``run()`` on a session whose
  JVM and Python workers were started by a warm-up run on the sample dump (reported, not
  counted). Per core = pages / (seconds × cores).
* **loop**: what a user would write instead, on one core: ``bz2.open`` + ``ElementTree.iterparse``
  over the same dump and ``mwparserfromhell.parse(text).strip_code()`` per page (plain text only:
  no sections, no categories, nothing written). Per core = pages / seconds.
* **CPU**: beside wall time, the CPU seconds of each (the job: this process, Spark's JVM and its
  Python workers), since other work on the machine stretches wall time.

The last line printed is one JSON object with ``job_pages_per_s_per_core`` and
``mwparserfromhell_pages_per_s_per_core``, their ratio and the CPU figures; everything also goes
to ``bench/results/ingest_wikipedia-<time>.json``.
"""

from __future__ import annotations

import argparse
import bz2
import datetime as dt
import itertools
import json
import os
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mwparserfromhell

from bench import cpu_seconds, figures
from jobs.ingest_wikipedia import Config, run
from jobs.spark import spark_session
from udfs import wikidump

SHARED = Path(os.environ.get("AUGURY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SAMPLES = ("dbpedia_minidump_enwiki.xml.bz2", "enwiki-table-markup.xml.bz2")
RESULTS = Path(__file__).resolve().parent / "results"
STEM = "enwiki-bench-pages-articles-multistream"
_TITLE = re.compile(rb"<title>(.*?)</title>")
_ID = re.compile(rb"<id>\d+</id>")


def sample_pages() -> list[bytes]:
    """The pages of the sample dumps, as XML."""
    pages: list[bytes] = []
    for name in SAMPLES:
        with (SHARED / "wikipedia" / name).open("rb") as f:
            pages += wikidump.pages_of(iter([bz2.decompress(f.read())]))
    return pages


def copies(pages: list[bytes], n: int) -> Iterator[tuple[int, str, bytes]]:
    """``n`` pages cycling through ``pages``, each with a fresh page id and title."""
    for k, xml in zip(range(n), itertools.cycle(pages), strict=False):
        title = _TITLE.search(xml).group(1).decode() + f" (copy {k})"
        xml = _TITLE.sub(f"<title>{title}</title>".encode(), xml, count=1)
        yield 10_000_000 + k, title, _ID.sub(f"<id>{10_000_000 + k}</id>".encode(), xml, count=1)


def build_dump(folder: Path, n: int) -> Path:
    dump = folder / f"{STEM}.xml.bz2"
    with dump.open("wb") as d, (folder / f"{STEM}-index.txt.bz2").open("wb") as i:
        wikidump.write_multistream(copies(sample_pages(), n), d, i)
    return dump


def plain_loop(dump: Path) -> dict[str, Any]:
    """One core: iterparse the dump and strip every page's wikitext to plain text."""
    pages = 0
    started, cpu = time.perf_counter(), time.process_time()
    with bz2.open(dump) as f:
        for _, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] != "page":
                continue
            text = next((e.text for e in element.iter() if e.tag.rsplit("}", 1)[-1] == "text"), None)
            mwparserfromhell.parse(text or "").strip_code()
            pages += 1
            element.clear()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return figures("pages", pages, seconds, cpu, 1)


def job(spark, dump: Path, root: Path) -> dict[str, Any]:
    cores = spark.sparkContext.defaultParallelism
    started, cpu = time.perf_counter(), cpu_seconds()
    pages, _ = run(Config(root=str(root), dumps=[str(dump)]), spark)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    return {**figures("pages", pages.rows_read, seconds, cpu, cores), "summary": pages.to_dict()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ingest_wikipedia", description=__doc__.split("\n\n")[0])
    p.add_argument("--pages", type=int, default=2400, help="pages in the generated dump")
    args = p.parse_args(argv)
    result: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory(prefix="augury-bench-") as tmp:
        work = Path(tmp)
        dump = build_dump(work, args.pages)
        result["input"] = {"pages": args.pages, "bytes": dump.stat().st_size}
        started = time.perf_counter()
        spark = spark_session("augury-bench-ingest-wikipedia")
        spark.sparkContext.setLogLevel("ERROR")
        result["spark_session_start_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()  # JVM, Python workers and their imports, off the clock
        run(Config(root=str(work / "warm"), dumps=[str(SHARED / "wikipedia" / SAMPLES[1])]), spark)
        result["warm_up_s"] = round(time.perf_counter() - started, 1)
        result["job"] = job(spark, dump, work / "out")
        spark.stop()
        result["mwparserfromhell_loop"] = plain_loop(dump)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"ingest_wikipedia-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    j, loop = result["job"], result["mwparserfromhell_loop"]
    print(
        f"{'method':<24}{'pages':>7}{'seconds':>9}{'cores':>6}{'pages/s/core':>14}{'cpu s':>8}{'pages/cpu s':>13}"
    )
    for name, f in (("job", j), ("mwparserfromhell loop", loop)):
        print(
            f"{name:<24}{f['pages']:>7}{f['seconds']:>9}{f['cores']:>6}{f['per_core']:>14.2f}"
            f"{f['cpu_seconds']:>8}{f['per_cpu_second']:>13.2f}"
        )
    print(f"results: {out}")
    line = {
        "job_pages_per_s_per_core": j["per_core"],
        "mwparserfromhell_pages_per_s_per_core": loop["per_core"],
        "ratio_per_core": j["per_core"] / loop["per_core"],
        "job_pages_per_cpu_second": j["per_cpu_second"],
        "mwparserfromhell_pages_per_cpu_second": loop["per_cpu_second"],
        "ratio_per_cpu_second": j["per_cpu_second"] / loop["per_cpu_second"],
    }
    print(json.dumps({k: round(v, 4) for k, v in line.items()}))


if __name__ == "__main__":
    main()
