"""Smoke run of the LLM layer: a small batch of every request kind on any backend.

    python -m pipelines.llm_smoke --root out                         # embedded local model
    python -m pipelines.llm_smoke --root out --backend http --url http://host:8000 --model NAME
    python -m pipelines.llm_smoke --root s3://bucket/augury --backend vllm --model meta-llama/...

It exercises free-text generation (with a parser), n>1 sampling with distinct seeds, a choice
request (probabilities over Yes/No from next-token log-probabilities) and a verbalized
probability, and it repeats one input so the duplicate is computed once.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field

import pyarrow as pa

from pipelines.llm.config import LLMConfig, add_llm_args, from_args
from pipelines.llm.stage import LLMStage, StagePlan, StageRunner
from udfs.llm_parsing import ParseError
from udfs.report import combined_table

COUNTRIES = ["France", "Japan", "Kenya", "Brazil", "France"]  # France twice: one computation
NAMES = ["Japan", "Tokyo", "Peru", "Lima"]
EVENTS = [
    "A magnitude 6 earthquake strikes somewhere in the world next week.",
    "The same person wins two national lotteries next month.",
]


def first_line(text: str) -> dict[str, str]:
    """The first non-empty line, trimmed of punctuation; a blank answer is a parse error."""
    for line in text.splitlines():
        answer = line.strip().strip(".\"'").strip()
        if answer:
            return {"answer": answer}
    raise ParseError("empty answer")


ANSWER_SCHEMA = pa.schema([pa.field("answer", pa.string())])

STAGES = {
    "capital": LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA),
    "capital_sampled": LLMStage(
        "capital_sampled",
        "smoke.capital",
        parser=first_line,
        parsed_schema=ANSWER_SCHEMA,
        sampling={"temperature": 0.8, "top_p": 0.95},
        samples=2,
    ),
    "is_country": LLMStage("is_country", "smoke.is_country"),
    "likelihood": LLMStage("likelihood", "smoke.likelihood"),
}


@dataclass(frozen=True)
class Config:
    root: str
    llm: LLMConfig = field(default_factory=LLMConfig)
    force: bool = False
    plan: bool = False


def run(config: Config) -> dict[str, pa.Table]:
    """Run the four smoke stages; returns their output tables by stage name."""
    runner = StageRunner(config.root, "llm_smoke", config.llm, force=config.force, plan_only=config.plan)
    countries = pa.table({"country": COUNTRIES})
    outputs = {
        "capital": runner.run(STAGES["capital"], countries),
        "capital_sampled": runner.run(STAGES["capital_sampled"], countries.slice(0, 2)),
        "is_country": runner.run(STAGES["is_country"], pa.table({"name": NAMES})),
        "likelihood": runner.run(STAGES["likelihood"], pa.table({"event": EVENTS})),
    }
    if config.plan:
        print(plan_table(runner.plans))
    else:
        print(combined_table(runner.summaries, f"llm_smoke on {config.llm.backend}:{config.llm.model}"))
    return outputs


def plan_table(plans: list[StagePlan]) -> str:
    """The requests and estimated tokens each stage would send."""
    header = (
        f"{'stage':<18}{'rows':>6}{'requests':>10}{'unique':>8}{'cached':>8}{'to run':>8}{'prompt tok':>12}"
    )
    lines = [header, "-" * len(header)]
    for p in plans:
        lines.append(
            f"{p.stage:<18}{p.rows:>6}{p.requests_total:>10}{p.requests_unique:>8}"
            f"{p.requests_cached:>8}{p.requests_to_compute:>8}{p.est_prompt_tokens:>12}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", required=True, help="root URI for outputs (path, file:// or s3://)")
    parser.add_argument("--force", action="store_true", help="recompute stages that already completed")
    parser.add_argument("--plan", action="store_true", help="print requests and token estimates; run nothing")
    add_llm_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(Config(root=args.root, llm=from_args(args), force=args.force, plan=args.plan))


if __name__ == "__main__":
    main()
