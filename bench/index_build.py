"""Index build on a corpus of long articles over many days: the index job with its defaults vs one
process that embeds title + lead with sentence-transformers and builds bm25s.

    python -m bench.index_build [--articles 5000] [--mean-words 1200] [--days 1000]
                                [--encoder all-MiniLM-L6-v2 | hashing-384] [--seed 0] [--work DIR]

* **corpus**: ``bench.synthetic`` with ``Shape.long_articles``: bodies of ``--mean-words`` words on
  average (half to 1.5 times that) in paragraphs of about 60 words, spread uniformly over
  ``--days`` days (a partition each), about 1 % undated.
* **engine**: the index job (``pipelines.index.build.run``, every option at its default but
  ``--encoder``: passage tables of 100 and 512 words, full text only) in a process of its own,
  timed from start to its summary: ``engine_build_s``. ``passages`` counts the rows of its passage tables.
* **resume**: the index is deleted and the job started again in a process of its own, killed
  (SIGKILL to its process group, Ray's processes with it) once its log shows half of the articles'
  documents written (every table's: one stream writes them together), then run again. ``resume_reembedded``: documents the rerun
  embedded that were in a table at the kill (what it embedded minus what the tables gained).
* **baseline**: what a user writes in one process: read title and body, cut the lead (the
  index's own ``headline``: title + first 200 words), embed it with sentence-transformers
  (``encode``, its default batch of 32; with ``hashing-<dim>``, the same hashing function the
  index uses), tokenize and index it with bm25s (k1 1.2, b 0.75, English stop words).
  ``baseline_build_s`` from reading to the built index.

Both sides run at the priority the bench was started with: Ray starts its workers 15 niceness levels
above their raylet (``RAY_worker_niceness``, so that the raylet and driver come first), which on
a machine shared with other work gave the engine's embedding actors about a twentieth of the
baseline's CPU weight; the bench sets it to 0 for the engine side. On an idle machine it changes
nothing.

``articles_per_s_per_core`` is the engine's articles a second over the machine's cores. The last
line printed is one JSON object; everything goes to ``bench/results/index_build-<time>.json``.
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

from bench.synthetic import Shape, write_corpus

RESULTS = Path(__file__).resolve().parent / "results"
LEAD_WORDS = 200  # the index job's default --lead-words


def engine_side(root: str, encoder: str, out: str) -> None:
    """The index job in this process, its summary to ``out``."""
    from pipelines.index.build import run
    from pipelines.index.config import Config
    from udfs.report import log_to_stderr

    log_to_stderr()
    started = time.perf_counter()
    summary = run(Config(root=root, encoder=encoder))
    result = {"build_s": time.perf_counter() - started, "summary": summary.to_dict()}
    Path(out).write_text(json.dumps(result, default=str))


def baseline_side(root: str, encoder: str, out: str) -> None:
    """Title + lead of every article embedded and indexed with bm25s, in this process."""
    import bm25s
    import pyarrow.dataset as ds

    from udfs.embeddings import embed, load_encoder
    from udfs.schemas import ARTICLES
    from udfs.text import headline

    started = time.perf_counter()
    dataset = ds.dataset(ARTICLES.uri(root), format="parquet", partitioning="hive")
    texts = [
        headline(title, text, LEAD_WORDS)
        for batch in dataset.to_batches(columns=["title", "text"])
        for title, text in zip(batch["title"].to_pylist(), batch["text"].to_pylist(), strict=True)
    ]
    if encoder.startswith("hashing-"):
        vectors = embed(texts, encoder)
    else:  # sentence-transformers as a user calls it: one encode over everything
        vectors = load_encoder(encoder).encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    result = {"build_s": time.perf_counter() - started, "documents": len(texts), "dim": vectors.shape[1]}
    Path(out).write_text(json.dumps(result))


def run_side(side: str, root: str, encoder: str, work: Path, kill_when=None) -> dict[str, Any] | None:
    """One side in a fresh interpreter (its stderr into ``work/<side>.log``); with ``kill_when``,
    killed with its process group as soon as ``kill_when()`` holds (then None)."""
    out = work / f"{side}.json"
    argv = [sys.executable, "-m", "bench.index_build", "--side", side, "--root", root]
    argv += ["--encoder", encoder, "--out", str(out)]
    with (work / f"{side}.log").open("a") as log:
        env = {**os.environ, "RAY_worker_niceness": "0"}  # Ray's workers at the bench's own priority
        proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True, env=env)
        while proc.poll() is None:
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return None
            time.sleep(0.2)
    if proc.returncode:
        raise SystemExit(f"the {side} side failed (exit {proc.returncode}): see {work / side}.log")
    return json.loads(out.read_text())


def half_written(log: Path) -> bool:
    """Whether the job's log shows half or more of the articles' documents written."""
    with contextlib.suppress(OSError):
        for line in reversed(log.read_text().splitlines()):
            if "stage=embed tables=" in line:
                return int(line.split("(", 1)[1].split("%", 1)[0]) >= 50
    return False


def table_rows(root: str) -> dict[str, int]:
    from pipelines.index.tables import connect

    db = connect(root)
    return {name: db.open_table(name).count_rows() for name in db.list_tables().tables}


def resume(root: str, encoder: str, work: Path) -> dict[str, Any]:
    """Build, kill mid-table, rebuild: what the rerun embedded again."""
    shutil.rmtree(Path(root, "index"), ignore_errors=True)
    killed_at = time.perf_counter()
    log = work / "engine.log"
    log.write_text("")
    assert run_side("engine", root, encoder, work, lambda: half_written(log)) is None
    killed_at = time.perf_counter() - killed_at
    at_kill = table_rows(root)
    rerun = run_side("engine", root, encoder, work)
    final = table_rows(root)
    metrics = rerun["summary"]["metrics"]
    embedded = {t: metrics[f"{t} documents embedded"] for t in final if f"{t} documents embedded" in metrics}
    tables = list(embedded)
    missing = {t: final[t] - at_kill.get(t, 0) for t in tables}
    return {
        "killed_after_s": killed_at,
        "rows_at_kill": at_kill,
        "rerun_s": rerun["build_s"],
        "rerun_embedded": embedded,
        "missing_at_kill": missing,
        "reembedded": sum(embedded.values()) - sum(missing.values()),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.index_build", description=__doc__.split("\n\n")[0])
    p.add_argument("--articles", type=int, default=5000, help="articles in the synthetic corpus")
    p.add_argument("--mean-words", type=int, default=1200, help="mean words of an article's body")
    p.add_argument("--days", type=int, default=1000, help="publication days (one partition each)")
    p.add_argument(
        "--encoder",
        default="all-MiniLM-L6-v2",
        help="both sides' encoder: the bundled MiniLM, or hashing-<dim> (model-free)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the corpus")
    p.add_argument(
        "--work", default=None, help="directory for the corpus and index (default: a temporary one)"
    )
    p.add_argument("--side", choices=("engine", "baseline"), help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.side:
        (engine_side if args.side == "engine" else baseline_side)(args.root, args.encoder, args.out)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result: dict[str, Any] = {"when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    result["load_before"] = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="augury-bench-index-", dir=args.work) as tmp:
        work = Path(tmp)
        root = str(work / "root")
        shape = Shape.long_articles(args.mean_words, args.days)
        result["corpus"] = write_corpus(root, args.articles, args.seed, shape=shape)
        print(f"corpus: {json.dumps(result['corpus'])}", file=sys.stderr)
        engine = run_side("engine", root, args.encoder, work)
        baseline = run_side("baseline", root, args.encoder, work)
        result["resume"] = resume(root, args.encoder, work)
        result["engine_log_tail"] = (work / "engine.log").read_text().splitlines()[-60:]
    result["load_after"] = os.getloadavg()
    metrics = engine["summary"]["metrics"]
    passages = sum(v for k, v in metrics.items() if k.startswith("rows in passages_"))
    result.update(engine=engine, baseline=baseline, args=vars(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"index_build-{result['when'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    cores = os.cpu_count() or 1
    print(
        f"engine {engine['build_s']:.1f} s ({metrics.get('rows in the index')} articles, {passages} passages) "
        f"vs baseline {baseline['build_s']:.1f} s ({baseline['documents']} title + lead); "
        f"ratio {engine['build_s'] / baseline['build_s']:.2f}; resume: killed after "
        f"{result['resume']['killed_after_s']:.0f} s, rerun {result['resume']['rerun_s']:.0f} s, "
        f"re-embedded {result['resume']['reembedded']}; load {result['load_before'][0]:.1f} → "
        f"{result['load_after'][0]:.1f}"
    )
    print(f"results: {out}")
    line = {
        "articles": args.articles,
        "mean_words": args.mean_words,
        "days": args.days,
        "passages": passages,
        "engine_build_s": round(engine["build_s"], 1),
        "baseline_build_s": round(baseline["build_s"], 1),
        "articles_per_s_per_core": round(args.articles / engine["build_s"] / cores, 3),
        "resume_reembedded": result["resume"]["reembedded"],
        "encoder": args.encoder,
        "load": round(result["load_after"][0], 1),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
