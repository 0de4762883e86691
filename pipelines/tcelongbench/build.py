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

import re
from typing import Any

from pipelines.builders import Build, Builder, Demo, Inputs, Result, ScaleInputs
from pipelines.evaluate.context import RetrievalConfig
from pipelines.quality import Quality
from pipelines.tcelongbench import order, outline, questions
from pipelines.tcelongbench.assemble import finish
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.formation import form_tces
from pipelines.tcelongbench.state import State
from udfs.audit import EventKey
from udfs.schemas import ARTICLES
from udfs.tcelongbench.assemble import ORDER_QUESTION
from udfs.tcelongbench.tables import NAME


def form(b: Build[Config], s: State) -> None:
    """S1: the temporal complex events of the corpus (``formation.form_tces``)."""
    s.events = form_tces(b.config, b.ledger)


def scale(inputs: ScaleInputs) -> dict[str, Any]:
    """``bench.scale``: the first TCE, 1 article a TCE day of 100 words, ``hashing-384`` for its
    own embeddings. The LLM work grows with the TCE's days, and the denser corpus gives its first
    TCE more of them (8 and 16 days with 5..30): a week at most keeps it about the same at both
    sizes (8 and 6 days)."""
    return dict(
        encoder="hashing-384", limit=1, max_articles_per_day=1, max_article_words=100, max_span_days=7
    )


BUILDER = Builder(
    name=NAME,
    config=Config,
    inputs=Inputs((ARTICLES,), index=True),
    state=State,
    steps=(
        form,
        outline.summarise_articles,
        outline.summarise_days,
        outline.extract_key_points,
        outline.filter_points,
        outline.attach_gold_articles,
        questions.generate,
        questions.verify_evidence,
        questions.add_distractors,
        questions.check_plausible,
        questions.vote_forecasts,
        order.build_problems,
        order.vote_orders,
    ),
    finish=finish,
    tables=dict.fromkeys(("tce", "tce_article", "context", "day_summary", "key_point", "rejected"), ())
    | dict.fromkeys(("qa_detail", "qa_order", "qa_forecast"), ("split",)),
    event=EventKey("TCE", ("qa_detail", "qa_order", "qa_forecast"), "qa_id", "tce_id"),
    retrieval=RetrievalConfig(k=3, doc_words=512, chunk_words=512),  # u = 3 chunks of 512 words
    demo=Demo(
        "TCELongBench (temporal complex events from the reported.ly live-blog articles)",
        (
            *(
                "--topic-hosts",
                "reported.ly",
                "--min-cluster-size",
                "3",
                "--min-samples",
                "2",
                "--limit",
                "1",
            ),
            *("--max-articles-per-day", "1", "--max-article-words", "100", "--max-new-tokens", "32"),
        ),
    ),
    scale=scale,
    quality=Quality(
        fixed=(re.escape(ORDER_QUESTION),),
        prompts=("tcelongbench.detail_qa", "tcelongbench.forecast_qa"),
        paper={
            "detail question openers": "What 68.22%, How 15.91%, Who 5.55%",
            "forecast question openers": "What will 62.58%, How will 11.63%, How many 11.33%",
        },
    ),
)


def run(config: Config) -> Result:
    """Build the benchmark under ``<root>/benchmarks/tcelongbench/``; returns its tables."""
    return BUILDER.run(config)
