"""Build PROPHET from the articles under a root and a set of resolved binary questions.

    python -m pipelines.prophet --root out --forecastbench QSET.json RESOLUTIONS.json   # paper defaults
    python -m pipelines.prophet --root out --questions questions.jsonl --estimator logprob
    python -m pipelines.prophet ... --plan            # LLM requests per question; runs nothing
    python -m pipelines.prophet ... --evidence-only   # then --plan gives exact CIL request counts

The demo (five ForecastBench questions, logprob estimator, small N and K_max) is in docs/prophet.md.
"""

from __future__ import annotations

import argparse
import logging

from pipelines.llm.config import add_llm_args, from_args
from pipelines.prophet.build import RATING_MODES, Config, run
from udfs.prophet.layout import ESTIMATORS, LAYOUTS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", required=True, help="root URI holding corpus/articles (path, file:// or s3://)"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--questions", help="JSONL or Parquet file of questions")
    source.add_argument(
        "--forecastbench", nargs=2, metavar=("QUESTION_SET", "RESOLUTION_SET"), help="ForecastBench files"
    )
    parser.add_argument("--question-ids", default="", help="comma-separated ids to keep (default: all)")
    parser.add_argument("--force", action="store_true", help="recompute LLM stages that already completed")
    parser.add_argument("--plan", action="store_true", help="print LLM requests per question; run nothing")
    parser.add_argument("--evidence-only", action="store_true", help="stop after the evidence tables")
    parser.add_argument("--seed", type=int, default=0)
    g = parser.add_argument_group("evidence")
    g.add_argument("--num-queries", type=int, default=5)
    g.add_argument("--max-words", type=int, default=8)
    g.add_argument("--search-depth", type=int, default=50, help="BM25 hits per query")
    g.add_argument("--rating", choices=RATING_MODES, default="generate")
    g.add_argument("--top-n", type=int, default=100)
    g.add_argument("--context-words", type=int, default=200)
    g.add_argument("--rating-words", type=int, default=400)
    g.add_argument("--max-tokens", type=int, help="cap every generate prompt's max_tokens (demo limit)")
    g = parser.add_argument_group("CIL")
    g.add_argument("--estimator", choices=ESTIMATORS, default="verbalized")
    g.add_argument("--layout", choices=LAYOUTS, default="listed")
    g.add_argument("--repeats", type=int, help="r (default 2 for verbalized; logprob is always 1)")
    g.add_argument("--w", type=int, default=3, help="window: older bins an article depends on")
    g.add_argument("--k-max", type=int, default=10)
    g.add_argument("--cil-words", type=int, default=60)
    g.add_argument("--retries", type=int, default=2)
    g.add_argument("--tau", type=float, default=0.0)
    g.add_argument("--k", type=int, default=3)
    add_llm_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(
        Config(
            root=args.root,
            questions=args.questions,
            forecastbench=tuple(args.forecastbench) if args.forecastbench else None,
            question_ids=tuple(i.strip() for i in args.question_ids.split(",") if i.strip()),
            llm=from_args(args),
            force=args.force,
            plan=args.plan,
            evidence_only=args.evidence_only,
            seed=args.seed,
            num_queries=args.num_queries,
            max_words=args.max_words,
            search_depth=args.search_depth,
            rating=args.rating,
            top_n=args.top_n,
            context_words=args.context_words,
            rating_words=args.rating_words,
            max_tokens=args.max_tokens,
            estimator=args.estimator,
            layout=args.layout,
            repeats=args.repeats,
            w=args.w,
            k_max=args.k_max,
            cil_words=args.cil_words,
            retries=args.retries,
            tau=args.tau,
            k=args.k,
        )
    )


if __name__ == "__main__":
    main()
