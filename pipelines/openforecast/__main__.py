"""Build the OpenForecast benchmark.

python -m pipelines.openforecast --root out --demo                     # small, embedded model
python -m pipelines.openforecast --root out --test-start 2026-03-01    # all data, newer corpora
python -m pipelines.openforecast --root s3://bucket/augury --backend vllm --model meta-llama/...
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging

from pipelines.llm.config import add_llm_args, from_args
from pipelines.openforecast.build import run
from pipelines.openforecast.config import Config, demo_config


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", required=True, help="root URI holding corpus/ (path, file:// or s3://)")
    parser.add_argument("--demo", action="store_true", help="the demo preset: 3 WCEP stories, small limits")
    parser.add_argument("--force", action="store_true", help="recompute LLM stages that already completed")
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--wiki-title", action="append", dest="wiki_titles", help="only this page (repeatable)"
    )
    parser.add_argument(
        "--wcep-story", action="append", dest="wcep_stories", help="only this story key, A|B (repeatable)"
    )
    parser.add_argument("--wcep-min-events", type=int)
    parser.add_argument("--max-docs", type=int, help="documents per WCEP complex event (default 10)")
    parser.add_argument("--max-doc-words", type=int, help="cut every document shown to the model")
    parser.add_argument("--timeline-samples", type=int, help="samples per WCEP timeline request (default 3)")
    parser.add_argument("--min-timeline-events", type=int)
    parser.add_argument("--max-new-tokens", type=int, help="cap on every generation")
    for name in ("train-end", "dev-end", "test-end", "test-start"):
        parser.add_argument(f"--{name}", type=dt.date.fromisoformat, help="split date yyyy-mm-dd")
    add_llm_args(parser)
    args = parser.parse_args(argv)
    llm = from_args(args)
    base = demo_config(args.root, llm) if args.demo else Config(root=args.root, llm=llm)
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Config)
        if f.name not in ("root", "llm") and getattr(args, f.name, None) is not None
    }
    for name in ("wiki_titles", "wcep_stories"):
        if name in overrides:
            overrides[name] = tuple(overrides[name])
    if {"train_end", "dev_end", "test_end"} & set(overrides):
        if args.test_start:
            parser.error("--test-start derives the three split dates; give it or --train/dev/test-end")
        overrides["test_start"] = None  # explicit dates replace a preset's test_start
    return dataclasses.replace(base, **overrides)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(parse_args(argv))


if __name__ == "__main__":
    main()
