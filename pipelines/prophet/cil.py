"""CIL per evidence article (spec §3): plan the terms, answer them in two LLM stages, assemble.

``udfs.prophet.plan`` lists the joint terms once per window and the conditional terms once per
(article, x, assignment); the joint and conditional stages answer them (``verbalized``: r sampled
repeats, failed parses retried; ``logprob``: one Yes/No forward pass); ``assemble`` computes
CIL. An article whose terms failed for good gets a null CIL and a rejected row (step ``cil``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.builders import Build
from pipelines.prophet.config import Config
from pipelines.prophet.stages import cil_stages
from pipelines.prophet.state import State
from udfs.prophet.cil import EvidenceArticle
from udfs.prophet.layout import PromptArticle, snippet
from udfs.prophet.plan import QuestionPlan, assemble, plan_question
from udfs.prophet.requests import conditional_key, joint_key, plan_requests, term_values

# how each stage's failed rows are recorded: unit, id column and record columns
JOINT_TERM = {"unit": "joint_term", "id_column": "bits", "record_columns": ("bin", "window_ids")}
CONDITIONAL_TERM = {
    "unit": "conditional_term",
    "id_column": "article_id",
    "record_columns": ("bin", "bits", "x"),
}


@dataclass
class CilResult:
    """The plan of every question with evidence, and (not in plan mode) the CIL and joint-table rows."""

    plans: dict[str, QuestionPlan]
    cil_rows: list[dict[str, Any]] = field(default_factory=list)
    joint_rows: list[dict[str, Any]] = field(default_factory=list)


def shown_articles(
    evidence: list[dict[str, Any]], articles: Mapping[str, dict[str, Any]], words: int
) -> dict[str, PromptArticle]:
    """Every evidence article as the CIL prompts show it: its date, title and first words
    (``articles``: the prompt fields of the candidates, ``evidence.Corpus.articles``)."""
    return {
        e["article_id"]: PromptArticle(
            e["published_at"].date().isoformat(),
            snippet(articles[e["article_id"]]["title"], articles[e["article_id"]]["text"], words),
        )
        for e in evidence
    }


def compute_cil(b: Build[Config], s: State) -> None:
    """``s.cil``: the plans of the questions with evidence, and (not in plan mode) their CIL and
    joint-table rows; nothing with ``evidence_only``."""
    c, ledger, questions = b.config, b.ledger, s.qrows
    if c.evidence_only:
        s.cil = CilResult({})
        return
    by_question: dict[str, list[EvidenceArticle]] = defaultdict(list)
    for e in s.evidence:
        by_question[e["question_id"]].append(EvidenceArticle(e["article_id"], e["published_at"], e["rating"]))
    plans = {
        qid: plan_question(qid, questions[qid]["resolution_date"], arts, c.w, c.k_max)
        for qid, arts in sorted(by_question.items())
    }
    joint_stage, conditional_stage = cil_stages(
        c,
        shown_articles(s.evidence, s.articles, c.cil_words),
        {qid: q["question"] for qid, q in questions.items()},
    )
    joints, conditionals = plan_requests(plans)
    retries = c.retries if c.estimator == "verbalized" else 0
    outputs = []
    for stage, rows, unit in (
        (joint_stage, joints, JOINT_TERM),
        (conditional_stage, conditionals, CONDITIONAL_TERM),
    ):
        out = ledger.run(stage, rows, parent_column="question_id", retries=retries, **unit)
        s.costs.add(out)
        outputs.append(out)
    result = CilResult(plans)
    s.cil = result
    if c.plan:
        return
    joint_values = term_values([outputs[0]], joint_key, c.r, c.estimator)
    conditional_values = term_values([outputs[1]], conditional_key, c.r, c.estimator)
    step = ledger.step("cil")
    extra = {"estimator": c.estimator, "repeats": c.r, "layout": c.layout, "model": c.llm.model}
    for qid, plan in plans.items():
        rows, table = assemble(
            plan,
            questions[qid]["answer"],
            {k[1:]: v for k, v in joint_values.items() if k[0] == qid},
            {k[1:]: v for k, v in conditional_values.items() if k[0] == qid},
        )
        result.cil_rows += [{**row, **extra} for row in rows]
        result.joint_rows += table
    for row in result.cil_rows:
        if row["status"] == "ok":
            ledger.keep(step)
        else:
            ledger.drop(
                step, row["reason"], unit="article", item_id=row["article_id"], parent_id=row["question_id"]
            )
    ledger.close(step)
