"""Smoke run of the LLM layer: a small batch of every request kind on any backend.

    python -m pipelines.llm_smoke --root out                         # embedded local model
    python -m pipelines.llm_smoke --root out --backend http --url http://host:8000 --model NAME
    python -m pipelines.llm_smoke --root s3://bucket/augury --backend vllm --model meta-llama/...

It exercises free-text generation (with a parser), n>1 sampling with distinct seeds, a choice
request (probabilities over Yes/No from next-token log-probabilities) and a verbalized
probability, and it repeats one input so the duplicate is computed once.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipelines.llm.stage import LLMStage, StagePlan, StageRunner
from pipelines.options import StageOptions, main
from udfs.layout import Layout
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
class Config(StageOptions):
    """The shared options only: the smoke inputs are fixed."""


def run(config: Config) -> dict[str, pa.Table]:
    """Run the four smoke stages; returns their output tables by stage name."""
    Layout(config.root).check_root(must_exist=False)
    runner = StageRunner(config.root, "llm_smoke", config.llm, force=config.force, plan_only=config.plan)
    countries = pa.table({"country": COUNTRIES})
    outputs = {
        "capital": runner.run(STAGES["capital"], countries),
        "capital_sampled": runner.run(STAGES["capital_sampled"], countries.slice(0, 2)),
        "is_country": runner.run(STAGES["is_country"], pa.table({"name": NAMES})),
        "likelihood": runner.run(STAGES["likelihood"], pa.table({"event": EVENTS})),
    }
    if config.plan:
        print(StagePlan.table(runner.plans))
    else:
        print(combined_table(runner.summaries, f"llm_smoke on {config.llm.backend}:{config.llm.model}"))
    return outputs


if __name__ == "__main__":
    main("pipelines.llm_smoke", Config, run, __doc__)
