"""The Daily Oracle build: forecasting questions from each day's news, built day by day.

For every pending day D (requested, not marked done yet; all requested days with ``--force``):
pick the day's articles (``articles``), then five LLM stages, each one batched pass over every
pending day's live units: ``summary`` and ``qa`` with the checks that need no model, then
``distractors`` (``qa``), ``filter`` and ``category`` (``judge``). Kept questions are checked
against the benchmark's invariants, every article and question is accounted for (``outputs``),
the days' partitions are written and the days marked (``days``); then the evaluation items and
the dataset card over every built day. See docs/daily_oracle.md.
"""

from __future__ import annotations

from typing import Any

from pipelines.builders import Build, Builder, Demo, Inputs, Result, ScaleInputs
from pipelines.daily_oracle.articles import select
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.days import pending_days
from pipelines.daily_oracle.judge import categorise, score
from pipelines.daily_oracle.outputs import finish
from pipelines.daily_oracle.qa import add_distractors, generate_questions, summarise
from pipelines.daily_oracle.state import State
from pipelines.evaluate.context import RetrievalConfig
from pipelines.llm.stage import StagePlan
from pipelines.quality import Quality
from udfs.audit import EventKey
from udfs.retrieval import DAILY_ORACLE_START
from udfs.schemas import ARTICLES

PLAN_NOTE = (
    "note: a stage only sees the rows whose earlier stages' answers are cached; once those run, "
    "the later stages have more to send."
)


def plan_text(b: Build[Config], s: State) -> str:
    """What a run would send: the pending days, the picked articles and each stage's plan."""
    days = f"{len(s.pending)} pending days ({s.pending[0]} .. {s.pending[-1]})"
    head = f"daily_oracle plan: {days}, {len(s.articles)} articles picked"
    return "\n".join([head, StagePlan.table(b.runner.plans), PLAN_NOTE])


def details(s: State) -> dict[str, Any]:
    """The days a run built (and marked done), skipped (built already) and left unmarked (why)."""
    return {"days_built": s.built, "days_skipped": s.skipped, "days_unmarked": s.unmarked}


def scale(inputs: ScaleInputs) -> dict[str, Any]:
    """``bench.scale``: the two oldest days, every synthetic host a publisher."""
    return {"publishers": inputs.hosts, "article_words": 200, "limit": 2}


BUILDER = Builder(
    name=NAME,
    config=Config,
    inputs=Inputs((ARTICLES,)),
    state=State,
    steps=(pending_days, select, summarise, generate_questions, add_distractors, score, categorise),
    finish=finish,
    tables={name: ("date",) for name in ("selection", "tf_questions", "mc_questions", "rejected")},
    event=EventKey("source article", ("tf_questions", "mc_questions"), "question_id", "article_id"),
    # §5: top 5 articles of 512 words, published in [2019-01-01, the item's cutoff)
    retrieval=RetrievalConfig(k=5, doc_words=512, since=DAILY_ORACLE_START, strict=True),
    # 360 new tokens: the filter's fixed headings and points alone take about 340
    demo=Demo(
        "Daily Oracle (one question set per news day)",
        (
            *("--from", "2022-09-15", "--to", "2022-09-18"),
            *("--publishers", "npr.org,chicago.suntimes.com,abc7.com", "--random", "1", "--hot", "1"),
            *("--max-new-tokens", "360", "--max-input-tokens", "3072", "--article-words", "100"),
        ),
    ),
    scale=scale,
    plan=plan_text,
    details=details,
    quality=Quality(
        prompts=("daily_oracle.qa",),
        paper={
            "questions": "31,510 over 2020–2024: 16,783 yes/no and 14,727 multiple choice (53% yes/no)",
            "questions per day": "17.2 on average, at most 24",
            "multiple-choice openers": '"What will" 27.3%, "Who will" 21.2%, "Which … will" 18.4%',
        },
    ),
)


def run(config: Config) -> Result:
    """Build every pending day; with ``plan``, print what the run would send and write nothing."""
    return BUILDER.run(config)
