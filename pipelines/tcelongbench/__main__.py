"""Build TCELongBench from the articles under a root.

    python -m pipelines.tcelongbench --root out                      # paper defaults, local model
    python -m pipelines.tcelongbench --root out --min-cluster-size 3 --min-samples 2 \\
        --max-tces 1 --max-articles-per-day 1 --max-tokens 48       # a small demo
    python -m pipelines.tcelongbench --root s3://bucket/augury --backend vllm --model meta-llama/...
"""

from __future__ import annotations

import argparse
import logging

from pipelines.llm.config import add_llm_args, from_args
from pipelines.tcelongbench.build import Config, run


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", required=True, help="root URI holding corpus/articles (path, file:// or s3://)"
    )
    parser.add_argument("--force", action="store_true", help="recompute LLM stages that already completed")
    parser.add_argument("--plan", action="store_true", help="print requests and token estimates; run nothing")
    parser.add_argument("--seed", type=int, default=0)
    g = parser.add_argument_group("TCE formation")
    g.add_argument(
        "--topic-keywords", type=_csv, default=(), help="comma-separated; keep articles naming any"
    )
    g.add_argument("--topic-hosts", type=_csv, default=(), help="comma-separated host allow-list")
    g.add_argument("--languages", type=_csv, default=("en",), help="comma-separated ISO 639-1 codes")
    g.add_argument("--min-chars", type=int, default=500)
    g.add_argument("--time-weight", type=float, default=1.0)
    g.add_argument("--time-scale-days", type=float, default=14.0)
    g.add_argument("--min-cluster-size", type=int, default=10)
    g.add_argument("--min-samples", type=int, default=5)
    g.add_argument("--min-span-days", type=int, default=5)
    g.add_argument("--max-span-days", type=int, default=30)
    g.add_argument("--max-tces", type=int, help="keep only the first N TCEs (demo limit)")
    g.add_argument(
        "--max-articles-per-day", type=int, help="keep at most N articles per TCE day (demo limit)"
    )
    g = parser.add_argument_group("generation and verification")
    g.add_argument("--max-article-chars", type=int, default=6000, help="article text cut for prompts")
    g.add_argument("--max-tokens", type=int, help="cap every prompt's max_tokens (demo limit)")
    g.add_argument("--plausible-mode", choices=["brief", "paper"], default="brief")
    g.add_argument("--verify-min-pass", type=int, default=2, help="passing rounds needed out of 3")
    g.add_argument(
        "--evidence-min-match", type=float, help="also require the evidence sentence in the article"
    )
    add_llm_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(
        Config(
            root=args.root,
            llm=from_args(args),
            force=args.force,
            plan=args.plan,
            seed=args.seed,
            topic_keywords=args.topic_keywords,
            topic_hosts=args.topic_hosts,
            languages=args.languages,
            min_chars=args.min_chars,
            time_weight=args.time_weight,
            time_scale_days=args.time_scale_days,
            min_cluster_size=args.min_cluster_size,
            min_samples=args.min_samples,
            min_span_days=args.min_span_days,
            max_span_days=args.max_span_days,
            max_tces=args.max_tces,
            max_articles_per_day=args.max_articles_per_day,
            max_article_chars=args.max_article_chars,
            max_tokens=args.max_tokens,
            plausible_mode=args.plausible_mode,
            verify_min_pass=args.verify_min_pass,
            evidence_min_match=args.evidence_min_match,
        )
    )


if __name__ == "__main__":
    main()
