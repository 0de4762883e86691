"""Articles per second per core: the ingest_news Spark job against the plain loop most people write.

    python -m bench.ingest_news [--copies 8] [--naive-records 6]

The input is one WARC file built from the real samples: ``--copies`` times the CC-NEWS sample
(39 news pages) followed by the CommonCrawl excerpt (16 HTML pages), so 55 HTML responses per
copy of which 5 are from npr.org. Two scenarios run on that same file:

* ``allow-list``: keep npr.org only (5 of 55 HTML responses, about one in ten);
* ``everything``: no allow-list.

The plain loop is warcio + ``NewsPlease.from_warc(record)`` with its defaults on every response
record, keeping the allowed hosts afterwards. ``from_warc`` fetches images over the network by
default, which offline costs seconds per record, so the loop is timed on ``--naive-records``
records spread over the first copy and extrapolated to the whole file (the table says so). The
same records are also timed with ``from_html(..., fetch_images=False)`` to show how much of the
gap is the network alone. "Articles" are counted once, by the job: pages whose main text has at
least 200 characters, before deduplication (the input repeats pages on purpose, so the job's
dedup would otherwise hide its own work); both loops run news-please on the same pages.

Results are printed as a table and written to ``bench/results/ingest_news-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.recordloader import ArcWarcRecord

from jobs.ingest_news import Config, run
from jobs.spark import spark_session
from udfs.news_extract import decode_html
from udfs.urls import host_matches
from udfs.warc import HeaderFilter, scan_file

SHARED = Path(os.environ.get("AUGURY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SOURCES = ("ccnews_2022-09_39records_reconstructed.warc.gz", "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz")
ALLOW = ["npr.org"]
RESULTS = Path(__file__).resolve().parent / "results"


def build_input(directory: Path, copies: int) -> Path:
    """One multi-member gzip WARC: the sample files concatenated ``copies`` times."""
    path = directory / "bench-input.warc.gz"
    parts = [(SHARED / "warc" / name).read_bytes() for name in SOURCES]
    with path.open("wb") as out:
        for _ in range(copies):
            for part in parts:
                out.write(part)
    return path


def html_hosts(path: Path) -> Counter:
    """Host of every HTML response in the file (header scan only)."""
    return Counter(row["host"] for row in scan_file(str(path), HeaderFilter()) if row["reason"] is None)


def time_plain_loop(path: Path, n: int, step: int) -> dict[str, Any]:
    """Seconds per response record for from_warc (defaults) and for from_html without images, on
    ``n`` response records taken every ``step``-th (so news pages and other pages are both in the
    sample)."""
    from newsplease import NewsPlease

    def sample() -> Iterator[ArcWarcRecord]:
        with path.open("rb") as f:
            responses = (r for r in ArchiveIterator(f) if r.rec_type == "response")
            taken = 0
            for i, record in enumerate(responses):
                if i % step:
                    continue
                yield record
                taken += 1
                if taken == n:
                    return

    from_warc, from_html = [], []
    for record in sample():
        t0 = time.perf_counter()
        NewsPlease.from_warc(record)
        from_warc.append(time.perf_counter() - t0)
    for record in sample():
        html = decode_html(record.content_stream().read())
        t0 = time.perf_counter()
        NewsPlease.from_html(html, url=record.rec_headers.get_header("WARC-Target-URI"), fetch_images=False)
        from_html.append(time.perf_counter() - t0)
    return {
        "records_timed": len(from_warc),
        "every_nth_response": step,
        "from_warc_s_per_record": sum(from_warc) / len(from_warc),
        "from_html_no_images_s_per_record": sum(from_html) / len(from_html),
        "load_average": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="bench.ingest_news", description=__doc__.split("\n\n")[0])
    p.add_argument("--copies", type=int, default=8, help="times the samples are repeated in the input")
    p.add_argument("--naive-records", type=int, default=8, help="records the plain loop is timed on")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="augury-bench-") as tmp:
        work = Path(tmp)
        path = build_input(work, args.copies)
        hosts = html_hosts(path)
        n_html = sum(hosts.values())
        n_allowed = sum(n for h, n in hosts.items() if host_matches(h, frozenset(ALLOW)))

        t0 = time.perf_counter()
        spark = spark_session("augury-bench-ingest-news", {"spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("ERROR")
        cores = spark.sparkContext.defaultParallelism
        spark_start = time.perf_counter() - t0
        t0 = time.perf_counter()  # start the Python workers and their imports once, off the clock
        run(
            Config(
                inputs=[str(SHARED / "warc" / "commoncrawl_whirlwind_CC-MAIN-2024-22.warc.gz")],
                root=str(work / "w"),
            ),
            spark,
        )
        warm_up = time.perf_counter() - t0

        job: dict[str, dict[str, Any]] = {}
        for scenario, allow in (("allow-list", ALLOW), ("everything", [])):
            t0 = time.perf_counter()
            summary = run(Config(inputs=[str(path)], root=str(work / scenario), allow_hosts=allow), spark)
            seconds = time.perf_counter() - t0
            job_load = os.getloadavg()
            articles = (
                summary.rows_written + summary.rejected["duplicate_url"] + summary.rejected["duplicate_text"]
            )
            job[scenario] = {
                "articles": articles,
                "seconds": seconds,
                "load_average": job_load,
                "summary": summary.to_dict(),
            }
        spark.stop()

        per_copy = n_html // args.copies
        naive = time_plain_loop(path, args.naive_records, max(1, per_copy // args.naive_records))

    n_responses = n_html  # every response in this input is an HTML 200 page
    rows = []
    for scenario, kept in (("allow-list", n_allowed), ("everything", n_html)):
        j = job[scenario]
        job_rate = j["articles"] / (j["seconds"] * cores)
        # Both loops run news-please on the same pages: the articles are the ones the job counted.
        naive_seconds = naive["from_warc_s_per_record"] * n_responses
        naive_rate = j["articles"] / naive_seconds
        no_images_rate = j["articles"] / (naive["from_html_no_images_s_per_record"] * n_responses)
        rows.append(
            {
                "scenario": scenario,
                "html_records": n_html,
                "kept_by_hosts": kept,
                "job_articles": j["articles"],
                "job_seconds": round(j["seconds"], 1),
                "job_cores": cores,
                "job_load_average": j["load_average"],
                "job_articles_per_s_per_core": job_rate,
                "plain_loop_seconds_est": round(naive_seconds, 1),
                "plain_loop_articles_per_s_per_core": naive_rate,
                "plain_loop_no_images_articles_per_s_per_core": no_images_rate,
                "ratio_job_vs_plain_loop": job_rate / naive_rate,
                "ratio_job_vs_plain_loop_no_images": job_rate / no_images_rate,
            }
        )
    result = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "input": {"copies": args.copies, "sources": SOURCES, "html_records": n_html, "allowed": n_allowed},
        "spark_session_start_s": round(spark_start, 1),
        "spark_warm_up_s": round(warm_up, 1),
        "plain_loop": naive,
        "scenarios": rows,
        "job_summaries": {k: v["summary"] for k, v in job.items()},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"ingest_news-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(table(result))
    print(f"results: {out}")


def table(result: dict[str, Any]) -> str:
    naive = result["plain_loop"]
    head = (
        "scenario",
        "HTML",
        "kept",
        "job art/s/core",
        "plain art/s/core",
        "ratio",
        "plain no-img",
        "ratio",
    )
    body = [
        (
            r["scenario"],
            str(r["html_records"]),
            str(r["kept_by_hosts"]),
            f"{r['job_articles_per_s_per_core']:.3f}",
            f"{r['plain_loop_articles_per_s_per_core']:.4f}",
            f"{r['ratio_job_vs_plain_loop']:.1f}x",
            f"{r['plain_loop_no_images_articles_per_s_per_core']:.3f}",
            f"{r['ratio_job_vs_plain_loop_no_images']:.1f}x",
        )
        for r in result["scenarios"]
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in [head, *body]]
    rule = "-" * len(lines[0])
    notes = [
        f"job: Spark local, {result['scenarios'][0]['job_cores']} cores, run() wall time after a warm-up run "
        f"(session start {result['spark_session_start_s']} s, warm-up {result['spark_warm_up_s']} s, not counted)",
        f"plain loop: warcio + NewsPlease.from_warc (defaults) on every response, 1 core; timed on "
        f"{naive['records_timed']} records, every {naive['every_nth_response']}th "
        f"({naive['from_warc_s_per_record']:.2f} s each), and extrapolated",
        f"plain no-img: the same loop with from_html(fetch_images=False) "
        f"({naive['from_html_no_images_s_per_record']:.2f} s each), for reference",
        "articles: counted by the job (main text of at least 200 characters, before deduplication: "
        "the input repeats pages on purpose); the plain loops extract the same pages",
        "1-min load average after each job run: "
        + ", ".join(f"{r['scenario']} {r['job_load_average'][0]:.1f}" for r in result["scenarios"])
        + f"; after the plain loop {naive['load_average'][0]:.1f} (other work on the machine slows both)",
    ]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule, *notes])


if __name__ == "__main__":
    main()
