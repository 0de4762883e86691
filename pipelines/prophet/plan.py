"""The ``--plan`` report: LLM requests per question, exact where the inputs of a stage are known.

Query generation is always exact; ratings are exact once the queries are cached; the joint and
conditional terms are exact once the evidence is known, otherwise bounded by the worst case for
N = ``top_n`` articles. ``retries`` are the retries of failed answers the cache already holds
(a run after a complete one makes exactly these requests; failures not answered yet may add
more). ``formula_*`` are the §6 counts from the question's bins: the planned conditionals equal
C; the planned joints equal J_shared unless the K_max cap gives two bins the same window, whose
table is then requested once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pipelines.builders import Build
from pipelines.llm.stage import StagePlan
from pipelines.prophet.config import Config
from pipelines.prophet.costs import Costs
from pipelines.prophet.state import State
from udfs.prophet.plan import QuestionPlan, cost_formulas


def plan_rows(
    config: Config,
    costs: Costs,
    question_ids: list[str],
    plans: dict[str, QuestionPlan],
    unknown_queries: set[str],
    unknown_evidence: set[str],
) -> list[dict[str, Any]]:
    """LLM requests per question by stage group (see the module docstring); ``None`` = unknown."""
    c = config
    worst_c, worst_j = c.r * c.top_n * 2 ** (c.k_max + 1), c.r * c.top_n * 2**c.k_max
    rows = []
    for qid in question_ids:
        row: dict[str, Any] = {
            "question_id": qid,
            "queries": costs.requests(qid, "queries"),
            "retries": costs.requests(qid, "retries"),
        }
        row["relevance"] = None if qid in unknown_queries else costs.requests(qid, "relevance")
        exact = qid not in unknown_evidence and not c.evidence_only
        row["exact"] = exact and row["relevance"] is not None
        if exact:
            row["joint"] = costs.requests(qid, "joint")
            row["conditional"] = costs.requests(qid, "conditional")
            counts = Counter(g for g, group in plans[qid].bins.items() for _ in group) if qid in plans else {}
            f = cost_formulas(counts, c.w, c.k_max, c.r)
            row.update(formula_conditional=f.conditionals, formula_joint_shared=f.joint_shared)
        else:
            row.update(joint=None, conditional=None, bound=worst_c + worst_j)
        rows.append(row)
    return rows


def plan_text(b: Build[Config], s: State) -> str:
    """What ``--plan`` prints: the stage plans, then the requests per question (``s.plan``)."""
    plans = s.cil.plans if s.cil is not None else {}
    s.plan = plan_rows(b.config, s.costs, list(s.qrows), plans, s.unknown_queries, s.unknown_evidence)
    return StagePlan.table(b.runner.plans) + "\n" + format_plan(s.plan)


def format_plan(rows: list[dict[str, Any]]) -> str:
    """The plan as a fixed-width table; ``?`` = not known before the queries run, ``≤`` = bound."""
    header = (
        f"{'question':<44}{'queries':>8}{'rating':>8}{'joint':>9}{'cond.':>10}{'retries':>8}{'total':>11}"
        f"{'§6 C/J':>16}"
    )
    lines = ["LLM requests per question (first attempts, then known retries)", header, "-" * len(header)]
    for r in rows:
        rating = "?" if r["relevance"] is None else str(r["relevance"])
        known = r["queries"] + (r["relevance"] or 0) + r["retries"]
        if r.get("joint") is not None:
            total = str(known + r["joint"] + r["conditional"])
            joint, cond = str(r["joint"]), str(r["conditional"])
            formula = f"{r['formula_conditional']}/{r['formula_joint_shared']}"
        else:
            joint, cond, formula = "?", "?", ""
            total = f"≤{known + r['bound']}" if r["relevance"] is not None else "?"
        lines.append(
            f"{r['question_id'][:43]:<44}{r['queries']:>8}{rating:>8}{joint:>9}{cond:>10}{r['retries']:>8}"
            f"{total:>11}{formula:>16}"
        )
    return "\n".join(lines)
