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

from pipelines.llm.ledger import Ledger
from pipelines.prophet.attempts import Attempts, Unit
from pipelines.prophet.config import Config
from pipelines.prophet.stages import cil_stages
from udfs.prophet.cil import EvidenceArticle
from udfs.prophet.layout import PromptArticle, snippet
from udfs.prophet.plan import QuestionPlan, assemble, plan_question
from udfs.prophet.requests import conditional_key, joint_key, plan_requests, term_values

JOINT_TERM = Unit("joint_term", "bits", ("bin", "window_ids"))
CONDITIONAL_TERM = Unit("conditional_term", "article_id", ("bin", "bits", "x"))


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


def compute_cil(
    attempts: Attempts,
    ledger: Ledger,
    config: Config,
    questions: Mapping[str, dict[str, Any]],
    evidence: list[dict[str, Any]],
    articles: Mapping[str, dict[str, Any]],
) -> CilResult:
    """Plans, CIL rows and joint-table rows of the questions with evidence (plans only in plan mode)."""
    c = config
    by_question: dict[str, list[EvidenceArticle]] = defaultdict(list)
    for e in evidence:
        by_question[e["question_id"]].append(EvidenceArticle(e["article_id"], e["published_at"], e["rating"]))
    plans = {
        qid: plan_question(qid, questions[qid]["resolution_date"], arts, c.w, c.k_max)
        for qid, arts in sorted(by_question.items())
    }
    joint_stage, conditional_stage = cil_stages(
        c,
        shown_articles(evidence, articles, c.cil_words),
        {qid: q["question"] for qid, q in questions.items()},
    )
    joints, conditionals = plan_requests(plans)
    retries = c.retries if c.estimator == "verbalized" else 0
    joint_out = attempts.run(joint_stage, joints, JOINT_TERM, retries)
    conditional_out = attempts.run(conditional_stage, conditionals, CONDITIONAL_TERM, retries)
    if c.plan:
        return CilResult(plans)
    joint_values = term_values(joint_out, joint_key, c.r, c.estimator)
    conditional_values = term_values(conditional_out, conditional_key, c.r, c.estimator)
    result = CilResult(plans)
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
    return result
