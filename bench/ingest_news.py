"""Articles per second per core: the ingest_news Spark job against the loops a user would write.

    python -m bench.ingest_news [--copies 32] [--files 4] [--loop-files 1]

Input: ``--files`` gzip WARC files generated under a temporary directory from the real samples:
each holds ``--copies`` / ``--files`` copies of the CC-NEWS sample (39 news pages) and the
CommonCrawl excerpt (16 HTML pages of other sites, 34 other records), every copy with fresh
WARC-Record-IDs and target URIs (``?copy=N``), so 55 HTML responses per copy, 5 of them npr.org.
Two scenarios run on the same files: ``everything`` (no filter) and ``allow-list`` (npr.org
only: about one HTML response in eleven).

Measured in one process, in this order:

* **job**: ``jobs.ingest_news.run`` with its defaults (hybrid extractor) on all files, Spark
  ``local[*]``; wall time of ``run()`` on a session whose JVM and Python workers were started by
  a small warm-up run (session start and warm-up are reported, not counted). Per core = articles
  / (seconds × cores).
* **loops**: warcio over the first ``--loop-files`` files, one core, keeping response records of
  the allowed hosts (checked on the target URI before any parsing), then (a)
  ``NewsPlease.from_html(html, url, fetch_images=False)`` or (b)
  ``trafilatura.bare_extraction(html, url=url, with_metadata=True)``. Per core = articles /
  seconds.
* **CPU**: beside wall time, the CPU seconds each method used (the job: this process, Spark's JVM
  and its Python workers; a loop: this process), so that other work on the machine, which
  stretches wall time, can be told apart from the methods' own cost.
* **readers**: FastWARC (the job's reader) and warcio reading every record and HTTP payload of
  all files, records per second.

An "article" is a page whose extracted main text has at least 200 characters, counted by each
method on its own output; the job counts before deduplication (the copies repeat pages on
purpose). The last line printed is one JSON object: ``job_per_core``,
``newsplease_loop_per_core``, ``trafilatura_loop_per_core`` (unfiltered, articles/s/core) and the
other figures. Everything also goes to ``bench/results/ingest_news-<time>.json``. Other work on
the machine slows every method; the 1-minute load average is recorded beside each figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from bench import cpu_seconds, figures
from jobs.ingest_news import Config, run
from jobs.spark import spark_session
from udfs.news_extract import decode_html
from udfs.urls import host_matches, host_of

SHARED = Path(os.environ.get("AUGURY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SOURCES = ("ccnews_2022-09_39records_reconstructed.warc.gz", "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz")
ALLOW = ("npr.org",)
MIN_CHARS = 200
RESULTS = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------- input


def members(path: Path) -> list[bytes]:
    """The decompressed records of a one-record-per-member gzip WARC."""
    data, out = path.read_bytes(), []
    while data:
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(data))
        data = d.unused_data
    return out


def fresh_copy(raw: bytes, copy: int) -> bytes:
    """A record with a new WARC-Record-ID and, for a URL, ``?copy=N`` added to its target URI."""
    head, sep, block = raw.partition(b"\r\n\r\n")
    lines = []
    for line in head.split(b"\r\n"):
        name = line.split(b":", 1)[0].lower()
        if name == b"warc-record-id":
            line = b"WARC-Record-ID: <urn:uuid:" + str(uuid.uuid4()).encode() + b">"
        elif name == b"warc-target-uri" and b"://" in line:
            line += (b"&" if b"?" in line else b"?") + b"copy=%d" % copy
        lines.append(line)
    return b"\r\n".join(lines) + sep + block


def build_input(directory: Path, copies: int, n_files: int) -> list[Path]:
    """``n_files`` gzip WARC files holding ``copies`` fresh copies of the samples in all."""
    records = [r for name in SOURCES for r in members(SHARED / "warc" / name)]
    paths = [directory / f"bench-{i:02d}.warc.gz" for i in range(n_files)]
    for copy in range(copies):
        with paths[copy % n_files].open("ab") as out:
            for raw in records:
                out.write(gzip.compress(fresh_copy(raw, copy), compresslevel=6, mtime=0))
    return paths


# ---------------------------------------------------------------- the loops a user writes


def newsplease_text(html: str, url: str) -> str:
    from newsplease import NewsPlease

    article = NewsPlease.from_html(html, url=url, fetch_images=False)
    return (article.maintext or "") if article else ""


def trafilatura_text(html: str, url: str) -> str:
    import trafilatura

    doc = trafilatura.bare_extraction(html, url=url, with_metadata=True)
    return (doc.text or "") if doc else ""


def plain_loop(
    paths: list[Path], extract: Callable[[str, str], str], allow: tuple[str, ...]
) -> dict[str, Any]:
    """warcio over ``paths``; every HTML 200 response of an allowed host is extracted."""
    articles = pages = 0
    started, cpu = time.perf_counter(), time.process_time()
    for path in paths:
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response":
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI")
                if allow and not host_matches(host_of(url), frozenset(allow)):
                    continue
                http = record.http_headers
                if http is None or http.get_statuscode() != "200":
                    continue
                if "html" not in (http.get_header("Content-Type") or "text/html"):
                    continue
                pages += 1
                try:
                    text = extract(decode_html(record.content_stream().read()), url)
                except Exception:  # a user's loop skips a page that fails
                    continue
                articles += len(text.strip()) >= MIN_CHARS
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"pages": pages, **figures("articles", articles, seconds, cpu, 1)}


def read_rate(paths: list[Path], reader: str) -> dict[str, Any]:
    """Records per second reading every record and HTTP payload with FastWARC or warcio."""
    from fastwarc.warc import ArchiveIterator as FastIterator

    records, started = 0, time.perf_counter()
    for path in paths:
        with path.open("rb") as f:
            if reader == "fastwarc":
                for record in FastIterator(f, parse_http=False):
                    record.parse_http()
                    record.reader.read()
                    records += 1
            else:
                for record in ArchiveIterator(f):
                    record.content_stream().read()
                    records += 1
    seconds = time.perf_counter() - started
    return {"records": records, "seconds": round(seconds, 2), "records_per_s": records / seconds}


# ---------------------------------------------------------------- the job


def job(spark, paths: list[Path], root: Path, allow: tuple[str, ...]) -> dict[str, Any]:
    cores = spark.sparkContext.defaultParallelism
    started, cpu = time.perf_counter(), cpu_seconds()
    summary = run(Config(inputs=[str(p) for p in paths], root=str(root), allow_hosts=list(allow)), spark)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    articles = summary.rows_written + summary.rejected["duplicate_url"] + summary.rejected["duplicate_text"]
    return {**figures("articles", articles, seconds, cpu, cores), "summary": summary.to_dict()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.ingest_news", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--copies", type=int, default=32, help="copies of the samples in the input (55 HTML pages each)"
    )
    p.add_argument("--files", type=int, default=4, help="WARC files the copies are spread over")
    p.add_argument("--loop-files", type=int, default=1, help="files the single-core loops read")
    args = p.parse_args(argv)

    result: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory(prefix="augury-bench-") as tmp:
        work = Path(tmp)
        paths = build_input(work, args.copies, args.files)
        result["input"] = {
            "files": len(paths),
            "copies": args.copies,
            "bytes": sum(p.stat().st_size for p in paths),
        }

        started = time.perf_counter()
        spark = spark_session("augury-bench-ingest-news")
        spark.sparkContext.setLogLevel("ERROR")
        result["spark_session_start_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()  # start the Python workers and their imports, off the clock
        run(Config(inputs=[str(SHARED / "warc" / SOURCES[0])], root=str(work / "warm")), spark)
        result["warm_up_s"] = round(time.perf_counter() - started, 1)

        scenarios = {"everything": (), "allow-list": ALLOW}
        loops = {"newsplease": newsplease_text, "trafilatura": trafilatura_text}
        for name in loops.values():  # imports and first-call set-up, off the clock
            name("<html><body><p>warm up</p></body></html>", "https://example.org/")
        for scenario, allow in scenarios.items():
            result[scenario] = {"job": job(spark, paths, work / scenario, allow)}
            for loop, extract in loops.items():
                result[scenario][f"{loop}_loop"] = plain_loop(paths[: args.loop_files], extract, allow)
        spark.stop()
        result["readers"] = {r: read_rate(paths, r) for r in ("fastwarc", "warcio")}

    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"ingest_news-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(table(result))
    print(f"results: {out}")
    everything, allowed = result["everything"], result["allow-list"]
    line = {
        "job_per_core": everything["job"]["per_core"],
        "newsplease_loop_per_core": everything["newsplease_loop"]["per_core"],
        "trafilatura_loop_per_core": everything["trafilatura_loop"]["per_core"],
        "allow_list_job_per_core": allowed["job"]["per_core"],
        "allow_list_newsplease_loop_per_core": allowed["newsplease_loop"]["per_core"],
        "allow_list_trafilatura_loop_per_core": allowed["trafilatura_loop"]["per_core"],
        "job_per_cpu_second": everything["job"]["per_cpu_second"],
        "newsplease_loop_per_cpu_second": everything["newsplease_loop"]["per_cpu_second"],
        "trafilatura_loop_per_cpu_second": everything["trafilatura_loop"]["per_cpu_second"],
        "fastwarc_records_per_s": result["readers"]["fastwarc"]["records_per_s"],
        "warcio_records_per_s": result["readers"]["warcio"]["records_per_s"],
    }
    print(json.dumps({k: round(v, 4) for k, v in line.items()}))


def table(result: dict[str, Any]) -> str:
    rows = [
        (
            "scenario",
            "method",
            "pages",
            "articles",
            "seconds",
            "cores",
            "art/s/core",
            "vs job",
            "cpu s",
            "art/cpu s",
            "load",
        )
    ]
    for scenario in ("everything", "allow-list"):
        figures = result[scenario]
        job_rate = figures["job"]["per_core"]
        for method in ("job", "trafilatura_loop", "newsplease_loop"):
            f = figures[method]
            rows.append(
                (
                    scenario,
                    method,
                    str(f.get("pages", "")),
                    str(f["articles"]),
                    f"{f['seconds']:.1f}",
                    str(f.get("cores", 1)),
                    f"{f['per_core']:.3f}",
                    "" if method == "job" else f"job {job_rate / f['per_core']:.2f}x",
                    f"{f['cpu_seconds']:.1f}",
                    f"{f['per_cpu_second']:.3f}",
                    f"{f['load']:.1f}",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    readers = result["readers"]
    lines.append(
        f"readers: FastWARC {readers['fastwarc']['records_per_s']:.0f} records/s, warcio "
        f"{readers['warcio']['records_per_s']:.0f} records/s "
        f"({readers['fastwarc']['records_per_s'] / readers['warcio']['records_per_s']:.1f}x), "
        f"{readers['fastwarc']['records']} records"
    )
    lines.append(
        f"Spark session start {result['spark_session_start_s']} s and warm-up run {result['warm_up_s']} s "
        "are not in the job's seconds"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
