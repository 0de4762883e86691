"""The TCELongBench builder: temporal complex events → outlines → detail / order / forecast QA.

Steps (``docs/tcelongbench.md``, spec ``tcelongbench.md``): S1 TCE formation (``formation``);
S2 article summaries, S3 day summaries, S4 key points, S5 key-point filter and gold articles
(``outline``); S6 detail and forecast questions, the Evidence check, distractors, the Plausible
check and S8 the voted Forecasting check (``questions``); S7 entities, order windows and the
voted Storytelling/Temporal check (``order``); S9 QA dedup, split and outputs (``assemble``).
LLM stages run through ``StageRunner`` (cached, resumable); every dropped row lands in
``benchmarks/tcelongbench/rejected`` with its stage and reason, and every step's counts reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StagePlan, StageRunner
from pipelines.tcelongbench import assemble, order, outline, questions
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.formation import form_tces
from pipelines.tcelongbench.stages import llm_stages
from udfs.report import RunSummary
from udfs.schemas import ARTICLES
from udfs.tcelongbench.tables import DETAIL, FORECAST, NAME


@dataclass
class Result:
    """The benchmark's tables by name, every step's summary and the dataset card (none in
    plan mode, which writes nothing)."""

    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    card: dict[str, Any] | None


def run(config: Config) -> Result:
    """Build the benchmark under ``<root>/benchmarks/tcelongbench/``; returns its tables."""
    runner = StageRunner(config.root, NAME, config.llm, force=config.force, plan_only=config.plan)
    ledger = Ledger(runner)
    ledger.inputs(ARTICLES)
    stages = llm_stages(config)

    events = form_tces(config, ledger)  # S1
    summarised = outline.summarise_articles(ledger, stages["article_summary"], events)  # S2
    days = outline.summarise_days(ledger, stages["day_summary"], events, summarised)  # S3
    raw_points = outline.extract_key_points(ledger, stages["key_points"], days)  # S4
    key_points = outline.filter_points(config, ledger, raw_points)  # S5
    kept = [p for p in key_points if p["status"] == "kept"]
    outline.attach_gold_articles(config, kept, events)

    candidates = questions.generate(config, ledger, stages, kept, events)  # S6
    verified = questions.verify_evidence(config, ledger, stages["evidence"], candidates)
    with_choices = questions.add_distractors(config, ledger, stages["distractors"], verified, events)
    plausible = questions.check_plausible(config, ledger, with_choices)
    forecasts = [q for q in plausible if q["task"] == FORECAST]
    mc_questions = [q for q in plausible if q["task"] == DETAIL] + questions.vote_forecasts(  # S8
        config, ledger, stages["forecast_votes"], forecasts
    )
    problems = order.build_problems(ledger, stages["entities"], kept, events)  # S7
    order_questions = order.vote_orders(config, ledger, stages["order_votes"], problems)

    if config.plan:
        print(StagePlan.table(runner.plans))
        return Result({}, ledger.summaries, None)

    final = assemble.dedup_questions(config, ledger, mc_questions, order_questions)  # S9
    tables, card = assemble.write_outputs(config, ledger, events, days, key_points, final)
    ledger.check()
    print(ledger.table())
    return Result(tables, ledger.summaries, card)
