"""Cutoff-filtered BM25 on the article index against the bm25s script a user would write.

    python -m bench.retrieval [--articles 200000] [--queries 200] [--k 10] [--seed 0]

Input: a synthetic corpus (``bench.synthetic``: publish times uniform over three years, ~1 %
undated, a Zipf vocabulary, 300–800 words an article) written once to ``ROOT/corpus/articles``,
and ``--queries`` queries of 2–6 content words, each with a random cutoff (µs) in the span.

Each side runs in its **own subprocess**, so the peak RSS it reports (``VmHWM`` of that
process: the driver's) is its own:

* **engine**: ``pipelines.index.build.run`` with the model-free ``hashing-384`` encoder (synthetic
  text has no meaning to embed) builds ``ROOT/index/articles`` (LanceDB: BM25 index on title +
  lead, B-tree on ``published_at``, vectors) — the build time — in one process, as the index job
  runs; then a second process, as a builder, opens ``ArticleIndex(root, prewarm=True)`` and runs
  ``search(query, cutoff, k, mode="bm25", text=False)`` per query (hit ids, scores and times, as
  the baseline returns), the cutoff being a prefilter inside the engine query and every hit
  checked against it. The engine's peak RSS is the larger of the two drivers'. Dense and hybrid
  latencies are measured on the same queries as extra information. The embedding, the writing
  and the index building run in Ray workers, which are not the driver: the sampled memory (PSS)
  of the whole process tree is shown beside the driver's peak RSS.
* **baseline**: one process, what a competent user writes: read the articles table (four columns,
  batch by batch), keep the same text the index holds (the title and the first 200 words of the
  body), ``bm25s.tokenize(stopwords="en")`` and ``bm25s.BM25(k1=1.2, b=0.75)`` (the engine's BM25
  parameters; numpy backend: numba is not installed), then per query: scores of every document,
  masked to ``published_at < cutoff`` (undated never), top-k by ``argpartition``.

Latency is per query, end to end (query in, hit list out), after two warm-up queries; p50/p95
over the ``--queries`` queries. The engine also answers the same queries in one
``search_many`` call (four in flight at once, ids and times only, as the batched retrieval stage
runs them): its time a query is set against the baseline's mean time a query. ``leaks`` counts
the hits of both sides (every engine run) that are at or after their cutoff or undated, judged
by the articles table's ``published_at``, not by a hit's own. The last line printed is one JSON
object; everything goes to ``bench/results/retrieval-<time>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.synthetic import Query, draw_queries, write_corpus

RESULTS = Path(__file__).resolve().parent / "results"
LEAD_WORDS = 200
WARM_UP = 2
MODES = ("bm25", "dense", "hybrid")
ENGINE_RUNS = (*MODES, "bm25_batched")  # the engine's timed runs, each with its hit lists
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _us(when: dt.datetime) -> int:
    return (when - EPOCH) // dt.timedelta(microseconds=1)


def _peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM``, which starts afresh at exec. (``ru_maxrss`` does not:
    a child started by a process that had grown to 300 MB reports at least 300 MB.)"""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux, bytes on macOS


def _latencies(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "mean_ms": float(ms.mean()),
    }


# ---------------------------------------------------------------- the two sides (subprocesses)


def engine_build(root: str, queries: list[Query], warm: list[Query], k: int) -> dict[str, Any]:
    """Build the index with the index job (a Ray job, as a user runs it)."""
    from pipelines.index.build import run
    from pipelines.index.config import Config

    started = time.perf_counter()
    summary = run(Config(root=root, encoder="hashing-384", passage_words=()))
    return {"build_s": time.perf_counter() - started, "build_summary": summary.to_dict()}


def engine_side(root: str, queries: list[Query], warm: list[Query], k: int) -> dict[str, Any]:
    """Query the built index with the retrieval API, as a builder's process does: one search per
    query in every mode, then all the queries in one ``search_many``."""
    from pipelines.index.engine import ArticleIndex

    started = time.perf_counter()
    index = ArticleIndex(root, prewarm=True)
    out: dict[str, Any] = {"open_s": time.perf_counter() - started}
    for mode in MODES:
        out[mode] = _timed(
            lambda q, mode=mode: [h.doc_id for h in index.search(q.text, q.cutoff, k, mode, text=False)],
            queries,
            warm,
        )
    started = time.perf_counter()
    batched = index.search_many([(q.text, q.cutoff, None) for q in queries], k, "bm25", text=False)
    out["bm25_batched"] = {
        "mean_ms": (time.perf_counter() - started) * 1000 / len(queries),
        "hits": [[h.doc_id for h in hits] for hits in batched],
    }
    return out


def _timed(search, queries: list[Query], warm: list[Query]) -> dict[str, Any]:
    """Latency (wall and CPU) of ``search`` per query, after the warm-up queries; its hits."""
    for q in warm:
        search(q)
    seconds, cpu, hits = [], [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        hits.append(search(q))
        seconds.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {**_latencies(seconds), "cpu_p50_ms": float(np.median(cpu) * 1000), "hits": hits}


def baseline_side(root: str, queries: list[Query], warm: list[Query], k: int) -> dict[str, Any]:
    """bm25s over the whole table in this process, masked by date per query."""
    import bm25s
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from udfs.schemas import ARTICLES

    started = time.perf_counter()
    dataset = ds.dataset(ARTICLES.uri(root), format="parquet", partitioning="hive")
    ids: list[str] = []
    published: list[np.ndarray] = []
    texts: list[str] = []
    undated = np.iinfo(np.int64).max  # never < a cutoff
    for batch in dataset.to_batches(columns=["article_id", "published_at", "title", "text"]):
        ids += batch["article_id"].to_pylist()
        us = pc.cast(batch["published_at"], "int64").to_numpy(zero_copy_only=False)
        published.append(
            np.where(batch["published_at"].is_valid().to_numpy(zero_copy_only=False), us, undated)
        )
        for title, text in zip(batch["title"].to_pylist(), batch["text"].to_pylist(), strict=True):
            texts.append(f"{title or ''} {' '.join(text.split()[:LEAD_WORDS])}")
    times = np.concatenate(published)
    tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    del texts
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(tokens, show_progress=False)
    del tokens
    out: dict[str, Any] = {"build_s": time.perf_counter() - started, "documents": len(ids)}
    out["peak_rss_after_build_mb"] = _peak_rss_mb()

    def search(q: Query) -> list[str]:
        words = bm25s.tokenize(q.text, stopwords="en", return_ids=False, show_progress=False)[0]
        token_ids = retriever.get_tokens_ids(words)
        if not token_ids:
            return []
        scores = retriever.get_scores_from_ids(token_ids)
        scores[times >= _us(q.cutoff)] = -np.inf
        top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return [ids[i] for i in top if scores[i] > 0]

    out["bm25"] = _timed(search, queries, warm)
    return out


def side_main(side: str, root: str, queries_file: str, k: int, out_file: str) -> None:
    spec = json.loads(Path(queries_file).read_text())
    queries, warm = (
        [Query(q["text"], dt.datetime.fromisoformat(q["cutoff"])) for q in spec[key]]
        for key in ("queries", "warm")
    )
    sides = {"engine-build": engine_build, "engine": engine_side, "baseline": baseline_side}
    result = sides[side](root, queries, warm, k)
    result["peak_rss_mb"] = _peak_rss_mb()
    Path(out_file).write_text(json.dumps(result, default=str))


# ---------------------------------------------------------------- the driver


def run_side(side: str, root: str, queries_file: Path, k: int, work: Path) -> dict[str, Any]:
    """Run one side in a fresh interpreter; also sample the memory (PSS) of its whole process tree,
    Ray's processes included."""
    out_file = work / f"{side}.json"
    argv = [sys.executable, "-m", "bench.retrieval", "--side", side, "--root", root]
    argv += ["--queries-file", str(queries_file), "--k", str(k), "--out", str(out_file)]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=sys.stderr)
    tree_peak = 0
    watched = psutil.Process(proc.pid)
    while proc.poll() is None:
        total = 0
        with contextlib.suppress(psutil.Error):
            for p in [watched, *watched.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):  # ended meanwhile
                    total += p.memory_full_info().pss  # shared pages split between their users
        tree_peak = max(tree_peak, total)
        time.sleep(1)
    if proc.returncode:
        raise SystemExit(f"the {side} side failed (exit {proc.returncode})")
    result = json.loads(out_file.read_text())
    result["tree_peak_pss_mb"] = tree_peak / 2**20
    result["wall_s"] = time.perf_counter() - started
    return result


def count_leaks(root: str, queries: list[Query], hits: list[list[str]]) -> int:
    """Hits at or after their query's cutoff, or undated, by the articles table's dates."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from udfs.schemas import ARTICLES

    wanted = sorted({h for row in hits for h in row})
    dataset = ds.dataset(ARTICLES.uri(root), format="parquet", partitioning="hive")
    table = dataset.to_table(
        columns=["article_id", "published_at"], filter=pc.field("article_id").isin(wanted)
    )
    true = dict(zip(table["article_id"].to_pylist(), table["published_at"].to_pylist(), strict=True))
    leaks = 0
    for q, row in zip(queries, hits, strict=True):
        for article in row:
            when = true.get(article)
            leaks += when is None or when >= q.cutoff  # undated (or unknown) counts as a leak
    return leaks


def overlap(a: list[list[str]], b: list[list[str]]) -> float:
    """Mean share of one side's top-k found in the other's (how alike the two BM25s rank)."""
    shares = [len(set(x) & set(y)) / max(len(x), len(y)) for x, y in zip(a, b, strict=True) if x or y]
    return float(np.mean(shares)) if shares else 1.0


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0])
    p.add_argument("--articles", type=int, default=200_000, help="articles in the synthetic corpus")
    p.add_argument("--queries", type=int, default=200, help="queries, each with a random cutoff")
    p.add_argument("--k", type=int, default=10, help="hits per query")
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus and the queries")
    p.add_argument(
        "--work", default=None, help="directory for the corpus and index (default: a temporary one)"
    )
    p.add_argument("--side", choices=("engine-build", "engine", "baseline"), help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--queries-file", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.side:
        side_main(args.side, args.root, args.queries_file, args.k, args.out)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    result["load_before"] = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="augury-bench-retrieval-", dir=args.work) as tmp:
        work = Path(tmp)
        root = str(work / "root")
        result["corpus"] = write_corpus(root, args.articles, args.seed)
        print(f"corpus: {json.dumps(result['corpus'])}", file=sys.stderr)
        queries = draw_queries(args.queries, args.seed)
        warm = draw_queries(WARM_UP, args.seed + 1)
        queries_file = work / "queries.json"
        queries_file.write_text(
            json.dumps(
                {
                    key: [{"text": q.text, "cutoff": q.cutoff.isoformat()} for q in qs]
                    for key, qs in (("queries", queries), ("warm", warm))
                }
            )
        )
        build = run_side("engine-build", root, queries_file, args.k, work)
        sides = {side: run_side(side, root, queries_file, args.k, work) for side in ("engine", "baseline")}
        engine = sides["engine"]  # the engine's figures: the index job's and the querying process's
        engine["build_s"] = build["build_s"]
        engine["build_summary"] = build["build_summary"]
        engine["peak_rss_mb"] = max(build["peak_rss_mb"], engine["peak_rss_mb"])
        engine["tree_peak_pss_mb"] = max(build["tree_peak_pss_mb"], engine["tree_peak_pss_mb"])
        leaks = {
            f"{side}_{mode}": count_leaks(root, queries, sides[side][mode]["hits"])
            for side, modes in (("engine", ENGINE_RUNS), ("baseline", ("bm25",)))
            for mode in modes
        }
    result["load_after"] = os.getloadavg()
    engine, baseline = sides["engine"], sides["baseline"]
    result["leaks"] = leaks
    result["bm25_overlap"] = overlap(engine["bm25"]["hits"], baseline["bm25"]["hits"])
    result["short_results"] = {
        side: sum(len(h) < args.k for h in sides[side]["bm25"]["hits"]) for side in ("engine", "baseline")
    }
    for side in sides.values():
        for mode in ENGINE_RUNS:
            if mode in side:
                side[mode].pop("hits")
    result.update(engine=engine, baseline=baseline, args=vars(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"retrieval-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))

    print(f"{'side':<10}{'build s':>9}{'p50 ms':>9}{'p95 ms':>9}{'peak RSS MB':>13}{'tree PSS MB':>13}")
    for name, s in sides.items():
        print(
            f"{name:<10}{s['build_s']:>9.1f}{s['bm25']['p50_ms']:>9.2f}{s['bm25']['p95_ms']:>9.2f}"
            f"{s['peak_rss_mb']:>13.0f}{s['tree_peak_pss_mb']:>13.0f}"
        )
    print(
        f"engine dense p50 {engine['dense']['p50_ms']:.2f} ms, hybrid p50 {engine['hybrid']['p50_ms']:.2f} ms; "
        f"bm25 ms a query, batched engine {engine['bm25_batched']['mean_ms']:.2f} vs one-by-one baseline "
        f"{baseline['bm25']['mean_ms']:.2f}; "
        f"p50 engine/baseline {engine['bm25']['p50_ms'] / baseline['bm25']['p50_ms']:.2f}, "
        f"peak RSS engine/baseline {engine['peak_rss_mb'] / baseline['peak_rss_mb']:.2f}; "
        f"leaks {leaks}; bm25 top-{args.k} overlap {result['bm25_overlap']:.2f}; "
        f"load {result['load_before'][0]:.1f} → {result['load_after'][0]:.1f}"
    )
    print(f"results: {out}")
    line = {
        "articles": args.articles,
        "leaks": sum(leaks.values()),
        "engine_p50_ms": engine["bm25"]["p50_ms"],
        "baseline_p50_ms": baseline["bm25"]["p50_ms"],
        "engine_peak_rss_mb": engine["peak_rss_mb"],
        "baseline_peak_rss_mb": baseline["peak_rss_mb"],
        "engine_build_s": engine["build_s"],
        "baseline_build_s": baseline["build_s"],
        "engine_p95_ms": engine["bm25"]["p95_ms"],
        "baseline_p95_ms": baseline["bm25"]["p95_ms"],
        "engine_dense_p50_ms": engine["dense"]["p50_ms"],
        "engine_hybrid_p50_ms": engine["hybrid"]["p50_ms"],
        "engine_batched_ms_per_query": engine["bm25_batched"]["mean_ms"],
        "baseline_mean_ms": baseline["bm25"]["mean_ms"],
        "p50_ratio": engine["bm25"]["p50_ms"] / baseline["bm25"]["p50_ms"],
        "rss_ratio": engine["peak_rss_mb"] / baseline["peak_rss_mb"],
        "load": result["load_after"][0],
    }
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in line.items()}))


if __name__ == "__main__":
    main()
