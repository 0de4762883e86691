"""One step of the scale bench in its own process: prepare a root, or run one builder on it.

    python -m bench.scale_run prepare ROOT --articles N [--seed S] [--no-index]
    python -m bench.scale_run BUILDER ROOT

``prepare`` writes the synthetic corpus (``bench.synthetic``), the small inputs
(``bench.scale_inputs``) and the article index (``hashing-384``, with the index job's default
passage tables, which the evaluation searches), unless ``--no-index``: only the builders that
declare they read it (PROPHET, TCELongBench) and the evaluation do. A builder runs with the
scripted backend (``bench.scale_scripts``) and the limits its registry entry declares
(``pipelines.builders.Builder.scale``). Either way the last stdout line is one JSON object: the
process's own peak RSS (``VmHWM``, read before anything is counted afterwards), its wall time,
the outcome (rows written) or the error, and the Ray cluster it attached to (``RAY_ADDRESS``, set
by ``bench.scale``; none for a step that needed no Ray).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from typing import Any

import ray

from bench.retrieval import _peak_rss_mb
from bench.scale_inputs import STORIES, TEST_START, hosts, questions_uri, write_inputs
from bench.scale_scripts import SCRIPTS
from bench.synthetic import write_corpus
from pipelines import builders
from udfs import storage

SCALED = {name: b for name, b in builders.registry().items() if b.scale is not None}
BUILDERS = (*SCALED, "evaluate")  # every builder that declares its scale-bench limits, then the evaluation
SEARCHING = frozenset({name for name, b in SCALED.items() if b.inputs.index} | {"evaluate"})  # read the index


def config(name: str, root: str) -> Any:
    """The Config of one run: a builder's declared limits (``Builder.scale``; the demos' limits,
    so its LLM work does not grow with the corpus, see ``bench.scale``), or the evaluation's."""
    from pipelines.llm.config import LLMConfig

    llm = LLMConfig(backend="scripted", script=SCRIPTS[name])
    if name == "evaluate":
        from pipelines.evaluate.run import Config

        return Config(root=root, llm=llm, question_files=(questions_uri(root),), limit=3, k=3, doc_words=80)
    builder = SCALED[name]
    inputs = builders.ScaleInputs(root, hosts(), tuple(STORIES), TEST_START, questions_uri(root))
    return builder.config(root=root, llm=llm, **builder.scale(inputs))


def run_builder(name: str, root: str) -> int | None:
    """Run one builder on ``root``; the evaluation returns its results written, a builder None
    (its eval items are counted from disk once the peak is read)."""
    if name == "evaluate":
        from pipelines.evaluate.run import run

        return len(run(config(name, root)).results)
    SCALED[name].run(config(name, root))
    return None


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
    out["ray"] = ray.get_runtime_context().gcs_address if ray.is_initialized() else None
    out["wall_s"] = time.perf_counter() - started
    if out["unit"] == "eval items":
        out["rows"] = eval_items(args.root, args.step)
    sys.stdout.flush()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
