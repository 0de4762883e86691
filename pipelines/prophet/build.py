"""The PROPHET builder: evidence per question, exact CIL per article, and the L1/L2 split.

Steps (spec ``prophet.md``, ``docs/prophet.md``): the corpus and its index (``evidence``), the
questions (``questions``), their evidence (``evidence``: queries, retrieval through the article
index with the cutoff inside the search, relevance, top N), CIL per evidence article (``cil``),
the L1/L2 rule; ``--plan`` prints the requests per question instead (``plan``).

Outputs under ``benchmarks/prophet/``: questions (by split), evidence, cil, joint_tables,
queries, rejected, eval_items (by split) and the dataset card. Every row a step or stage
rejected is in ``rejected`` with its stage and reason, except the corpus articles no search can
return (undated, near-duplicates), which the ``corpus`` step and the card count; every step's
counts reconcile.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from pipelines.builders import Build, Builder, Demo, Inputs, Outputs, Result, ScaleInputs
from pipelines.evaluate.context import RetrievalConfig
from pipelines.llm.ledger import Ledger
from pipelines.prophet.cil import compute_cil
from pipelines.prophet.config import NAME, Config
from pipelines.prophet.evidence import Corpus, generate_queries, open_corpus, rate, retrieve, select
from pipelines.prophet.plan import plan_text
from pipelines.prophet.questions import eval_items, question_rows, read_questions
from pipelines.prophet.state import State
from pipelines.prophet.tables import (
    CIL_SCHEMA,
    EVIDENCE_SCHEMA,
    JOINT_SCHEMA,
    QUERY_SCHEMA,
    QUESTION_OUT_SCHEMA,
)
from udfs.audit import EventKey
from udfs.schemas import ARTICLES


def finish(b: Build[Config], s: State) -> Outputs:
    """The queries and evidence; unless ``evidence_only``, the CIL, the joint tables, the
    questions with their L1/L2 split (the ``split`` step), the evaluation items and the card."""
    tables = {
        "queries": pa.Table.from_pylist(s.queries, schema=QUERY_SCHEMA),
        "evidence": pa.Table.from_pylist(s.evidence, schema=EVIDENCE_SCHEMA),
    }
    if b.config.evidence_only:
        return Outputs(tables)
    assert s.cil is not None and s.corpus is not None
    corpus, cil = s.corpus, s.cil
    out_rows = question_rows(
        b.config, s.costs, s.qrows, s.queries, s.candidates, s.evidence, cil.cil_rows, corpus
    )
    split = b.ledger.step("split")
    b.ledger.keep(split, len(out_rows))
    split.metrics.update(Counter(q["split"] for q in out_rows))
    b.ledger.close(split)
    tables |= {
        "cil": pa.Table.from_pylist(cil.cil_rows, schema=CIL_SCHEMA),
        "joint_tables": pa.Table.from_pylist(cil.joint_rows, schema=JOINT_SCHEMA),
        "questions": pa.Table.from_pylist(out_rows, schema=QUESTION_OUT_SCHEMA),
    }
    items = eval_items(out_rows, s.evidence, cil.cil_rows)
    return Outputs(tables, items, lambda written, _n: counts(written, s.skipped, corpus, b.ledger))


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


def scale(inputs: ScaleInputs) -> dict[str, Any]:
    """``bench.scale``: 2 questions, the demo's ``logprob`` estimator and ``score`` rating,
    3 queries, 10 hits a query, N = 6, K_max = 2."""
    return {
        "questions": inputs.questions,
        "limit": 2,
        "estimator": "logprob",
        "rating": "score",
        "num_queries": 3,
        "search_depth": 10,
        "top_n": 6,
        "k_max": 2,
        "context_words": 40,
        "rating_words": 60,
        "cil_words": 25,
    }


BUILDER = Builder(
    name=NAME,
    config=Config,
    inputs=Inputs((ARTICLES,), index=True),
    state=State,
    steps=(open_corpus, read_questions, generate_queries, retrieve, rate, select, compute_cil),
    finish=finish,
    tables=dict.fromkeys(("queries", "evidence", "cil", "joint_tables", "rejected"), ())
    | {"questions": ("split",)},
    event=EventKey("question", ("questions",), "question_id", "question_id"),
    # N = 10 inside the question's kept evidence set, every article shown as its summary (§5)
    retrieval=RetrievalConfig(k=10, summaries=True),
    demo=Demo(
        "PROPHET (real ForecastBench questions, logprob CIL)",
        (
            "--forecastbench",
            "{shared}/questions/forecastbench_2024-07-21-human.json",
            "{shared}/questions/forecastbench_2024-07-21_resolution_set.json",
            *("--question-ids", "IHLIDXUS@2024-07-28,CBRE@2024-07-28,NASDAQ100@2024-08-20"),
            *("--estimator", "logprob", "--rating", "score", "--num-queries", "2", "--search-depth", "6"),
            *("--top-n", "4", "--k-max", "2", "--max-new-tokens", "16"),
            *("--context-words", "40", "--rating-words", "60", "--cil-words", "25"),
        ),
    ),
    scale=scale,
    plan=plan_text,
    details=lambda s: {"plan": s.plan},
)


def run(config: Config) -> Result:
    """Build the benchmark (or, with ``plan``, print the LLM requests per question and stop)."""
    return BUILDER.run(config)
