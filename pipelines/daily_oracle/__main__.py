"""Build Daily Oracle questions day by day.

    python -m pipelines.daily_oracle --root out                          # every corpus day >= 3 days old
    python -m pipelines.daily_oracle --root out --date 2022-09-18        # one day (skipped if built)
    python -m pipelines.daily_oracle --root out --from 2022-09-15 --to 2022-09-18
    python -m pipelines.daily_oracle --root s3://bucket/augury --backend vllm --model meta-llama/...

A day already built is skipped (no LLM request); adding a day of news builds just that day.
A day is left unbuilt (built again by the next run) when one of its requests ended with an engine
error or the corpus has no article of it. ``--force`` rebuilds the requested days from the cached
responses; to recompute a stage's answers, delete ``<root>/daily_oracle/<stage>/``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging

from pipelines.daily_oracle.pipeline import Config, run
from pipelines.llm.config import add_llm_args, from_args
from udfs.daily_oracle.selection import DEFAULT_PUBLISHERS


def _days(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[dt.date, ...]:
    days = set(args.date or [])
    if (args.start is None) != (args.end is None):
        parser.error("--from and --to go together")
    if args.start is not None:
        if args.end < args.start:
            parser.error("--to is before --from")
        days |= {args.start + dt.timedelta(days=k) for k in range((args.end - args.start).days + 1)}
    return tuple(sorted(days))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--root", required=True, help="root URI holding corpus/articles (path, file:// or s3://)"
    )
    parser.add_argument(
        "--date", type=dt.date.fromisoformat, action="append", help="a day to build (repeatable)"
    )
    parser.add_argument("--from", dest="start", type=dt.date.fromisoformat, help="first day to build")
    parser.add_argument("--to", dest="end", type=dt.date.fromisoformat, help="last day to build (inclusive)")
    parser.add_argument(
        "--publishers",
        default=",".join(DEFAULT_PUBLISHERS),
        help="allowed hosts, comma-separated (subdomains match)",
    )
    parser.add_argument("--random", type=int, default=3, help="random articles per day")
    parser.add_argument("--hot", type=int, default=3, help="hot-topic articles per day")
    parser.add_argument("--seed", type=int, default=0, help="global seed of every draw and shuffle")
    parser.add_argument(
        "--max-tokens", type=int, help="cap on generated tokens per step (default 1024, filter 2048)"
    )
    parser.add_argument(
        "--article-chars", type=int, help="cut the article shown to the model to N characters"
    )
    parser.add_argument(
        "--max-input-tokens", type=int, help="local backend: longest prompt the engine accepts (default 2048)"
    )
    parser.add_argument("--exclude-diagonal", action="store_true", help="coherence mean without the diagonal")
    parser.add_argument(
        "--settle-days", type=int, default=3, help="without dates: build days at least N days old"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="rebuild requested days even if built, reusing cached responses "
        "(to recompute them, delete <root>/daily_oracle/<stage>/)",
    )
    add_llm_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    llm = from_args(args)
    if args.max_input_tokens:
        llm = llm.replace(max_input_tokens=args.max_input_tokens)
    run(
        Config(
            root=args.root,
            dates=_days(args, parser),
            publishers=tuple(p.strip() for p in args.publishers.split(",") if p.strip()),
            n_random=args.random,
            n_hot=args.hot,
            seed=args.seed,
            llm=llm,
            max_tokens=args.max_tokens,
            article_chars=args.article_chars,
            exclude_diagonal=args.exclude_diagonal,
            settle_days=args.settle_days,
            force=args.force,
        )
    )


if __name__ == "__main__":
    main()
