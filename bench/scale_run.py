"""One step of the scale bench in its own process: prepare a root, or run one builder on it.

    python -m bench.scale_run prepare ROOT --articles N [--seed S] [--no-index]
    python -m bench.scale_run BUILDER ROOT

``prepare`` writes the synthetic corpus (``bench.synthetic``), the small inputs
(``bench.scale_inputs``) and the article index (``hashing-384``, with the index job's default
passage tables, which the evaluation searches), unless ``--no-index``: only PROPHET,
TCELongBench and the evaluation read it. A builder runs with the scripted backend
(``bench.scale_scripts``) and the limits of ``config``. Either way the last stdout line is one JSON
object: the process's own peak RSS (``VmHWM``, read before anything is counted afterwards), its
wall time, and the outcome (rows written) or the error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from typing import Any

from bench.retrieval import _peak_rss_mb
from bench.scale_inputs import STORIES, TEST_START, hosts, questions_uri, write_inputs
from bench.scale_scripts import SCRIPTS
from bench.synthetic import write_corpus
from udfs import storage

BUILDERS = ("openforecast", "daily_oracle", "prophet", "tcelongbench", "evaluate")
SEARCHING = frozenset({"prophet", "tcelongbench", "evaluate"})  # read the article index


def config(name: str, root: str) -> Any:
    """The Config of one builder: its demo-style limits, so its LLM work does not grow with the
    corpus (see ``bench.scale``)."""
    from pipelines.llm.config import LLMConfig

    llm = LLMConfig(backend="scripted", script=SCRIPTS[name])
    if name == "openforecast":
        from pipelines.openforecast.config import Config

        return Config(
            root=root,
            llm=llm,
            wcep_stories=tuple(STORIES),
            wcep_min_events=5,
            max_docs=3,
            max_doc_words=120,
            timeline_samples=1,
            min_timeline_events=3,
            test_start=TEST_START,
            limit=4,
        )
    if name == "daily_oracle":
        from pipelines.daily_oracle.config import Config

        return Config(root=root, llm=llm, publishers=hosts(), article_words=200, limit=2)
    if name == "prophet":
        from pipelines.prophet.config import Config

        return Config(
            root=root,
            llm=llm,
            questions=questions_uri(root),
            limit=2,
            estimator="logprob",
            rating="score",
            num_queries=3,
            search_depth=10,
            top_n=6,
            k_max=2,
            context_words=40,
            rating_words=60,
            cil_words=25,
        )
    if name == "tcelongbench":
        from pipelines.tcelongbench.config import Config

        return Config(
            root=root,
            llm=llm,
            encoder="hashing-384",
            limit=1,
            max_articles_per_day=1,
            max_article_words=100,
            # the LLM work grows with the TCE's days, and the denser corpus gives its first TCE
            # more of them (8 and 16 days with 5..30; 10 and 30 eval items before long clusters
            # were split): a week at most keeps it about the same at both sizes (8 and 6 days)
            max_span_days=7,
        )
    if name == "evaluate":
        from pipelines.evaluate.run import Config

        return Config(root=root, llm=llm, question_files=(questions_uri(root),), limit=3, k=3, doc_words=80)
    raise ValueError(f"no builder {name!r}; one of {', '.join(BUILDERS)}")


MODULES = {
    "openforecast": "pipelines.openforecast.build",
    "daily_oracle": "pipelines.daily_oracle.build",
    "prophet": "pipelines.prophet.build",
    "tcelongbench": "pipelines.tcelongbench.build",
    "evaluate": "pipelines.evaluate.run",
}


def run_builder(name: str, root: str) -> int | None:
    """Run one builder on ``root``; the evaluation returns its results written, a builder None
    (its eval items are counted from disk once the peak is read)."""
    outcome = importlib.import_module(MODULES[name]).run(config(name, root))
    return len(outcome.results) if name == "evaluate" else None


def eval_items(root: str, name: str) -> int:
    uri = storage.join(root, "benchmarks", name, "eval_items")
    return storage.count_rows(uri) if storage.exists(uri) else 0


def prepare(root: str, articles: int, seed: int, index: bool) -> int:
    """Corpus, inputs and (when a builder of the run reads it) the index of one root."""
    corpus = write_corpus(root, articles, seed)
    inputs = write_inputs(root, seed)
    print(json.dumps({"corpus": corpus, "inputs": inputs}), file=sys.stderr)
    if index:
        from pipelines.index.build import run
        from pipelines.index.config import Config

        run(Config(root=root, encoder="hashing-384"))
    return corpus["articles"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.scale_run", description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=("prepare", *BUILDERS))
    p.add_argument("root")
    p.add_argument("--articles", type=int, default=20_000, help="prepare: articles to write")
    p.add_argument("--seed", type=int, default=0, help="prepare: seed of the corpus and the inputs")
    p.add_argument(
        "--no-index", action="store_true", help="prepare: no index (no builder of the run searches)"
    )
    args = p.parse_args(argv)
    started = time.perf_counter()
    out: dict[str, Any] = {"step": args.step, "rows": None, "unit": None, "error": None}
    try:
        if args.step == "prepare":
            out["rows"] = prepare(args.root, args.articles, args.seed, not args.no_index)
            out["unit"] = "articles"
        else:
            out["rows"] = run_builder(args.step, args.root)
            out["unit"] = "results" if args.step == "evaluate" else "eval items"
    except Exception as exc:  # the bench reports the error in its table
        traceback.print_exc()
        out["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    out["rss_mb"] = _peak_rss_mb()
    out["wall_s"] = time.perf_counter() - started
    if out["unit"] == "eval items":
        out["rows"] = eval_items(args.root, args.step)
    sys.stdout.flush()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
