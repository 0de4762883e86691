"""The PROPHET builder: evidence per question, exact CIL per article, and the L1/L2 split.

Steps (spec ``prophet.md``, ``docs/prophet.md``): the questions (``questions``), their evidence
(``evidence``: queries, retrieval through the article index with the cutoff inside the search,
relevance, top N), CIL per evidence article (``cil``), the L1/L2 rule; ``--plan`` prints the
requests per question instead (``plan``).

Outputs under ``benchmarks/prophet/``: questions (by split), evidence, cil, joint_tables,
queries, rejected, eval_items (by split) and the dataset card. Every row a step or stage
rejected is in ``rejected`` with its stage and reason, except the corpus articles no search can
return (undated, near-duplicates), which the ``corpus`` step and the card count; every step's
counts reconcile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines.benchmarks import write_benchmark_table, write_card, write_eval_items
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StagePlan, StageRunner
from pipelines.prophet.attempts import Attempts
from pipelines.prophet.cil import CilResult, compute_cil
from pipelines.prophet.config import NAME, Config
from pipelines.prophet.evidence import Corpus, generate_queries, rate, retrieve, select
from pipelines.prophet.plan import format_plan, plan_rows
from pipelines.prophet.questions import eval_items, load_questions, question_rows
from pipelines.prophet.tables import (
    CIL_SCHEMA,
    EVIDENCE_SCHEMA,
    JOINT_SCHEMA,
    QUERY_SCHEMA,
    QUESTION_OUT_SCHEMA,
)
from udfs.report import RunSummary
from udfs.schemas import ARTICLES


@dataclass
class Result:
    """The benchmark's tables by name, every step's summary, the card and (``--plan``) the plan."""

    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    card: dict[str, Any] | None
    plan: list[dict[str, Any]] = field(default_factory=list)


def run(config: Config) -> Result:
    """Build the benchmark (or, with ``plan``, print the LLM requests per question and stop)."""
    runner = StageRunner(config.root, NAME, config.llm, force=config.force, plan_only=config.plan)
    ledger = Ledger(runner)
    ledger.inputs(ARTICLES)
    corpus = Corpus.open(ledger, config.root)
    questions, skipped = load_questions(config)
    qrows = {q["question_id"]: q for q in questions.to_pylist()}
    dates = {qid: q["resolution_date"] for qid, q in qrows.items()}
    attempts = Attempts(ledger, config.seed)

    queries, unknown_queries = generate_queries(attempts, config, questions)
    candidates = retrieve(ledger, config, corpus, queries, dates)
    articles = corpus.articles(c["article_id"] for c in candidates)  # the candidates' prompt fields only
    rated, unknown_ratings = rate(attempts, config, articles, qrows, candidates)
    unknown_evidence = unknown_queries | unknown_ratings
    evidence = select(
        ledger, config, articles, [r for r in rated if r["question_id"] not in unknown_evidence], dates
    )
    cil = (
        CilResult({})
        if config.evidence_only
        else compute_cil(attempts, ledger, config, qrows, evidence, articles)
    )
    if config.plan:
        rows = plan_rows(config, attempts.costs, list(qrows), cil.plans, unknown_queries, unknown_evidence)
        print(StagePlan.table(runner.plans))
        print(format_plan(rows))
        return Result({}, ledger.summaries, None, rows)

    tables = {
        "queries": pa.Table.from_pylist(queries, schema=QUERY_SCHEMA),
        "evidence": pa.Table.from_pylist(evidence, schema=EVIDENCE_SCHEMA),
    }
    if not config.evidence_only:
        out_rows = question_rows(
            config, attempts.costs, qrows, queries, candidates, evidence, cil.cil_rows, corpus
        )
        split = ledger.step("split")
        ledger.keep(split, len(out_rows))
        split.metrics.update(Counter(q["split"] for q in out_rows))
        ledger.close(split)
        tables |= {
            "cil": pa.Table.from_pylist(cil.cil_rows, schema=CIL_SCHEMA),
            "joint_tables": pa.Table.from_pylist(cil.joint_rows, schema=JOINT_SCHEMA),
            "questions": pa.Table.from_pylist(out_rows, schema=QUESTION_OUT_SCHEMA),
        }
    ledger.check()
    for name, table in tables.items():
        write_benchmark_table(config.root, NAME, name, table, ("split",) if name == "questions" else ())
    ledger.write_rejected()
    card = None
    if not config.evidence_only:
        tables["eval_items"] = write_eval_items(
            config.root, NAME, eval_items(out_rows, evidence, cil.cil_rows)
        )
        card = write_card(config.root, NAME, runner, counts(tables, skipped, corpus, ledger), config)
    print(ledger.table())
    return Result(tables, ledger.summaries, card)


def counts(
    tables: dict[str, pa.Table], skipped: dict[str, int], corpus: Corpus, ledger: Ledger
) -> dict[str, Any]:
    """The dataset card's counts."""
    questions = tables["questions"].to_pylist()
    cil = tables["cil"].to_pylist()
    return {
        "questions": len(questions),
        "questions_by_split": dict(sorted(Counter(q["split"] for q in questions).items())),
        "importer_skipped": skipped,
        "corpus_articles_searchable": corpus.searchable,
        "corpus_articles_not_searchable": corpus.not_searchable,
        "queries": tables["queries"].num_rows,
        "evidence_rows": tables["evidence"].num_rows,
        "cil_rows": len(cil),
        "cil_failed": sum(1 for r in cil if r["status"] != "ok"),
        "cil_truncated_windows": sum(1 for r in cil if r["truncated"]),
        "rejected_by_stage_and_reason": {
            f"{stage}: {reason}": n
            for stage, reasons in ledger.rejected_counts().items()
            for reason, n in reasons.items()
        },
        "llm_requests": sum(q["llm_requests"] for q in questions),
    }
