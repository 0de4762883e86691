"""Driver memory of every builder and of the evaluation at N and 4N articles: does it grow with
the corpus, or with the work a run was asked to do?

    python -m bench.scale [--articles 20000] [--repeat 2] [--seed 0] [--keep ROOT] [--only NAME ...] [--timeout S]

Two roots, one per size: a synthetic corpus (``bench.synthetic``) of N and of 4N articles over
the same three years (so a day, a window, a search hit list hold four times the articles, nothing
else changes), the small inputs the corpus does not hold (``bench.scale_inputs``: 15 WCEP portal
events citing synthetic articles, 2 Wikipedia pages, 3 resolved questions; the same at both
sizes) and the article index built by the index job with the model-free ``hashing-384`` encoder.
Then, on each root, OpenForecast, Daily Oracle, PROPHET, TCELongBench and the evaluation run end
to end with the scripted backend (``bench.scale_scripts``), **each in its own process**
(``bench.scale_run``), which reports its own peak RSS (``VmHWM``: the driver's; Ray workers are
other processes) and wall time. Every step's driver attaches to one Ray cluster, started by
the bench (or the one ``RAY_ADDRESS`` names), as the demo's steps do. Their limits are the
demos' so the LLM work is the same at both sizes and only the reading around it can grow (each
builder declares its own once, in its registry entry: ``pipelines.builders.Builder.scale``):

* OpenForecast: ``--limit 4`` complex events (the 3 WCEP stories, 5 events each, at most 3
  documents, and 1 Wikipedia page), one timeline sample, 120 words a document;
* Daily Oracle: ``--limit 2`` days (the two oldest), 3 random + 3 hot-topic articles a day, every
  synthetic host a publisher, 200 words an article;
* PROPHET: ``--limit 2`` questions, the demo's ``logprob`` estimator and ``score`` rating,
  3 queries, 10 hits a query, N = 6, K_max = 2;
* TCELongBench: ``--limit 1`` TCE, 1 article a TCE day, 100 words an article, ``hashing-384``
  for its own embeddings; the paper's clustering (the demo's min cluster 3 / min samples 2 makes
  every cluster of the 4N corpus span more than 30 days: no TCE, no LLM work at 4N);
* evaluation: every benchmark built on the root plus the 3 questions, ``--limit 3`` items per
  benchmark and task, k = 3 documents of 80 words, default modes.

Each builder runs ``--repeat`` times (default 2) at each size, each time on fresh outputs (what
a run wrote is removed before the next, so no run is served by another's cache), and a size's
figure is its lowest peak: one process's peak varies by ±25 MB between identical runs (thread
arenas, Ray's start), noise that only adds, so the least of the runs is the best estimate (as
``timeit`` keeps the best of its runs). The table lists every run (the ``prepare`` rows are the
corpus, inputs and index job: not a builder). ``kb_per_extra_article`` = (RSS at 4N − RSS at N)
× 1024 / 3N: what one more article costs a driver; a builder with a failed or timed-out run has
null figures and the error in the table. The last line printed is one JSON object; everything,
every run's peak included, goes to ``bench/results/scale-<time>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from bench.scale_run import BUILDERS, SEARCHING
from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray

RESULTS = Path(__file__).resolve().parent / "results"
GRACE_S = 30  # after a timeout, SIGTERM, then SIGKILL this much later


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_step(
    step: str,
    root: str,
    articles: int,
    seed: int,
    logs: Path,
    timeout: float,
    *extra: str,
    repeat: int = 0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one step (``prepare`` or a builder's ``repeat``-th run) in a fresh interpreter (with
    ``env``); its JSON line, or the error when it has none (crash, timeout)."""
    name = f"{step}-{articles}" + (f"-{repeat}" if repeat else "")
    argv = [sys.executable, "-m", "bench.scale_run", step, root, "--articles", str(articles)]
    argv += ["--seed", str(seed), *extra]
    started = time.perf_counter()
    with (logs / f"{name}.out").open("w") as out, (logs / f"{name}.err").open("w") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True, env=env)
        try:
            proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            stop(proc)
    lines = (logs / f"{name}.out").read_text(errors="replace").splitlines()
    result = next((json.loads(x) for x in reversed(lines) if x.startswith('{"step"')), None)
    if result is None or timed_out:
        tail = (logs / f"{name}.err").read_text(errors="replace").strip().splitlines()[-1:]
        error = (
            f"timed out after {timeout:.0f} s"
            if timed_out
            else f"exit {proc.returncode}: {' '.join(tail)[:300]}"
        )
        result = {"step": step, "rows": None, "unit": None, "error": error, "wall_s": None, "ray": None}
    result.update(
        articles=articles, repeat=repeat, process_s=time.perf_counter() - started, exit=proc.returncode
    )
    if result["error"]:
        result["rss_mb"] = None  # never a figure for a run that did not finish
    return result


def stop(proc: subprocess.Popen) -> None:
    """End a step that ran too long: its process group (it leads one), politely first."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def outcome(r: dict[str, Any]) -> str:
    return r["error"] if r["error"] else f"{r['rows']:,} {r['unit']}"


def kb_per_article(small: float | None, large: float | None, n: int) -> float | None:
    """What one more article costs the driver: the RSS growth from N to 4N over 3N articles."""
    if small is None or large is None:
        return None
    return round((large - small) * 1024 / (3 * n), 2)


def summary(runs: list[dict[str, Any]], n: int, builders: list[str]) -> dict[str, Any]:
    """The last printed line: each builder's peak RSS at both sizes (the least of its runs; none
    when a run failed or there was none) and the growth per article."""
    out: dict[str, Any] = {"articles": [n, 4 * n], "builders": {}}
    for name in builders:
        rss = {}
        for size, key in ((n, "rss_mb_small"), (4 * n, "rss_mb_large")):
            peaks = [r["rss_mb"] for r in runs if r["step"] == name and r["articles"] == size]
            rss[key] = round(min(peaks), 1) if peaks and None not in peaks else None
        kb = kb_per_article(rss["rss_mb_small"], rss["rss_mb_large"], n)
        out["builders"][name] = {**rss, "kb_per_extra_article": kb}
    return out


def table(runs: list[dict[str, Any]]) -> str:
    rows = [f"{'builder':<14}{'articles':>10}{'run':>5}{'driver peak RSS MB':>20}{'wall s':>9}  outcome"]
    for r in runs:
        rss = "-" if r["rss_mb"] is None else f"{r['rss_mb']:.0f}"
        wall = r["wall_s"] if r["wall_s"] is not None else r["process_s"]
        rows.append(
            f"{r['step']:<14}{r['articles']:>10,}{r['repeat'] + 1:>5}{rss:>20}{wall:>9.1f}  {outcome(r)}"
        )
    return "\n".join(rows)


def outputs(root: Path) -> set[Path]:
    """What a root holds, two levels deep: a builder's runs add ``<name>/`` (its stages),
    ``benchmarks/<name>/`` or ``eval/``."""
    return {p for top in root.iterdir() for p in (top, *(top.iterdir() if top.is_dir() else ()))}


def bench(
    n: int, seed: int, work: Path, builders: list[str], timeout: float, keep: bool, repeat: int
) -> list[dict]:
    """Prepare each root and run each builder on it ``repeat`` times, one process at a time, each
    attached to this process's Ray cluster; the outputs of a builder's run are removed before its
    next run (its last run's stay: the evaluation reads the benchmarks)."""
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    runs = []
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for size in (n, 4 * n):
        root = work / f"n{size}"
        for step, i in [("prepare", 0)] + [(b, i) for b in builders for i in range(repeat)]:
            log(f"[{dt.datetime.now():%H:%M:%S}] {step} at {size:,} articles, run {i + 1}: start")
            extra = () if step != "prepare" or SEARCHING & set(builders) else ("--no-index",)
            before = outputs(root) if step != "prepare" else set()
            r = run_step(step, str(root), size, seed, logs, timeout, *extra, repeat=i, env=env)
            rss = "-" if r["rss_mb"] is None else f"{r['rss_mb']:.0f} MB"
            log(
                f"[{dt.datetime.now():%H:%M:%S}] {step} at {size:,} articles, run {i + 1}: end, {r['process_s']:.0f} s, {rss}, {outcome(r)}"
            )
            runs.append(r)
            if step == "prepare" and r["error"]:
                break  # no root to build on
            if step != "prepare" and i < repeat - 1:
                for path in sorted(outputs(root) - before, reverse=True):  # children first
                    if path.is_dir():
                        shutil.rmtree(path)
                    else:
                        path.unlink()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--articles", type=int, default=20_000, help="N: the small corpus (the large one is 4N)")
    p.add_argument(
        "--repeat", type=int, default=2, help="runs of each builder at each size (its least peak counts)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the corpora and the inputs")
    p.add_argument("--keep", metavar="ROOT", help="build the two roots (and logs) under ROOT and keep them")
    p.add_argument("--only", action="append", choices=BUILDERS, help="run only this builder (repeatable)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds a run may take before it is ended")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    builders = [b for b in BUILDERS if not args.only or b in args.only]
    result: dict[str, Any] = {
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "args": vars(args),
    }
    result["load_before"] = os.getloadavg()
    # one Ray cluster for every step (started here unless this process has one), as the demo
    # shares one: a cluster a step cost each run a start and a stop of Ray's processes
    own_ray = not ray.is_initialized()
    ensure_ray(LLMConfig())
    started = time.perf_counter()
    if args.keep:
        work = Path(args.keep)
        runs = bench(args.articles, args.seed, work, builders, args.timeout, True, args.repeat)
    else:
        with tempfile.TemporaryDirectory(prefix="augury-bench-scale-") as tmp:
            runs = bench(args.articles, args.seed, Path(tmp), builders, args.timeout, False, args.repeat)
    result.update(total_s=time.perf_counter() - started, load_after=os.getloadavg(), runs=runs)
    if own_ray:
        ray.shutdown()
    line = summary(runs, args.articles, builders)
    result["summary"] = line
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"scale-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(table(runs))
    print(
        f"total {result['total_s']:.0f} s; load {result['load_before'][0]:.1f} → {result['load_after'][0]:.1f}"
    )
    print(f"results: {out}")
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
