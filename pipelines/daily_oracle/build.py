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

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines.daily_oracle import days as day_marks
from pipelines.daily_oracle import outputs
from pipelines.daily_oracle.articles import count_selection, select_articles
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.judge import categorise, score
from pipelines.daily_oracle.qa import add_distractors, generate_questions, summarise
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StagePlan, StageRunner
from udfs.report import RunSummary
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.daily_oracle")

PLAN_NOTE = (
    "note: a stage only sees the rows whose earlier stages' answers are cached; once those run, "
    "the later stages have more to send."
)


@dataclass
class Result:
    """What a run did: days built (and marked done), skipped (built already) and left unmarked
    (with the reason), this run's rows, summaries, LLM requests computed, the card and (``--plan``)
    the stage plans."""

    days_built: list[dt.date]
    days_skipped: list[dt.date]
    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    requests_computed: int
    card: dict[str, Any] | None
    days_unmarked: dict[dt.date, str] = field(default_factory=dict)
    plans: list[StagePlan] = field(default_factory=list)


def run(config: Config) -> Result:
    """Build every pending day; with ``plan``, print what the run would send and write nothing."""
    runner = StageRunner(config.root, NAME, config.llm, force=config.force, plan_only=config.plan)
    ledger = Ledger(runner)
    ledger.inputs(ARTICLES)
    requested = day_marks.requested_days(config)
    pending, skipped = requested.pending, requested.skipped
    if not pending:
        return _nothing_pending(config, runner, ledger, skipped)

    articles, prefiltered = select_articles(config, pending)
    count_selection(ledger, articles, prefiltered)
    summarise(ledger, articles, config)
    questions = generate_questions(ledger, articles, config)
    add_distractors(ledger, questions, config)
    score(ledger, questions, config)
    categorise(ledger, [q for q in questions if q.alive])
    if config.plan:
        print(plan_text(pending, len(articles), runner.plans))
        return Result([], skipped, {}, ledger.summaries, 0, None, plans=runner.plans)

    versions = json.dumps(dict(sorted(runner.prompts_used.items())), sort_keys=True)
    tf, mc = outputs.kept_rows(questions, config, versions)
    outputs.account(ledger, articles, questions)
    tables = outputs.tables(articles, tf, mc, ledger)
    day_marks.clear_marks(config.root, pending)  # a forced day is done again only once rewritten
    outputs.write_days(config.root, pending, tables)
    unmarked = day_marks.mark_days(config.root, pending, articles, questions, prefiltered)
    day_marks.count_days(ledger, pending, unmarked)
    built = [d for d in pending if d not in unmarked]
    card = outputs.write_outputs(config, runner, built, skipped, unmarked)
    ledger.check()
    print(ledger.table())
    computed = sum(s.metrics.get("requests_computed", 0) for s in runner.summaries)
    return Result(built, skipped, tables, ledger.summaries, computed, card, unmarked)


def plan_text(pending: list[dt.date], n_articles: int, plans: list[StagePlan]) -> str:
    """What a run would send: the pending days, the picked articles and each stage's plan."""
    days = f"{len(pending)} pending days ({pending[0]} .. {pending[-1]})"
    head = f"daily_oracle plan: {days}, {n_articles} articles picked"
    return "\n".join([head, StagePlan.table(plans), PLAN_NOTE])


def _nothing_pending(config: Config, runner: StageRunner, ledger: Ledger, skipped: list[dt.date]) -> Result:
    """No day to build: rewrite eval_items and the card if they lag behind the day markers."""
    card = None
    if skipped and not config.plan and not outputs.outputs_current(config.root):
        log.info("eval_items or the dataset card is missing or behind the day markers: rewriting them")
        card = outputs.write_outputs(config, runner, [], skipped, {})
    print(f"daily_oracle: nothing to build ({len(skipped)} requested days already built)")
    return Result([], skipped, {}, ledger.summaries, 0, card)
