"""Planning the LLM requests CIL needs, assembling CIL from their answers, and the §6 cost formulas.

Per question, ``plan_question`` lists every term the adjustment sum needs, each once:

- joint terms q(a): one per (window, assignment), shared by every article of the bins with that
  window. Without the K_max cap two non-empty bins never have the same window (a non-empty bin
  within w of another is in that one's window, not in its own); with the cap they can (both
  keep the same top-rated articles), and the table is then listed once, under the first bin;
- conditional terms P(Yes | X_i=x, X_W=a): one per (article, x, assignment).

The pipeline turns the terms into prompts (``udfs.prophet.layout``), runs them as two LLM
stages and hands the answers, keyed like the terms, to ``assemble``. ``naive_joint_terms`` lists
what the per-article method would request instead (every article recomputes its bin's joint
table), for the cost comparison.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from udfs.prophet.cil import (
    EvidenceArticle,
    Window,
    assignments,
    bin_articles,
    bin_windows,
    cil_terms,
    normalize_joint,
)

JointKey = tuple[tuple[str, ...], str]  # (window article ids, assignment)
ConditionalKey = tuple[str, int, str]  # (article id, x, assignment)


@dataclass(frozen=True)
class JointTerm:
    bin: int
    window_ids: tuple[str, ...]
    bits: str

    @property
    def key(self) -> JointKey:
        return (self.window_ids, self.bits)


@dataclass(frozen=True)
class ConditionalTerm:
    article_id: str
    bin: int
    x: int
    window_ids: tuple[str, ...]
    bits: str

    @property
    def key(self) -> ConditionalKey:
        return (self.article_id, self.x, self.bits)


@dataclass
class QuestionPlan:
    """Bins, windows and the unique terms of one question, in request order (bin by bin: the
    joint table, then each article's conditionals with x = 1 before x = 0)."""

    question_id: str
    resolution_date: dt.date
    articles: dict[str, EvidenceArticle]
    bins: dict[int, list[EvidenceArticle]]
    windows: dict[int, Window]
    joints: list[JointTerm] = field(default_factory=list)
    conditionals: list[ConditionalTerm] = field(default_factory=list)


def plan_question(
    question_id: str, resolution_date: dt.date, articles: Iterable[EvidenceArticle], w: int, k_max: int
) -> QuestionPlan:
    """Bin the articles, build the windows and list each needed term once (a window shared by
    several bins has its joint terms listed once)."""
    articles = list(articles)
    ids = [a.article_id for a in articles]
    if len(set(ids)) != len(ids):
        raise ValueError(f"question {question_id}: article ids repeat")
    bins = bin_articles(articles, resolution_date)
    windows = bin_windows(bins, w, k_max)
    plan = QuestionPlan(question_id, resolution_date, {a.article_id: a for a in articles}, bins, windows)
    seen_windows: set[tuple[str, ...]] = set()
    for g, group in bins.items():
        window = windows[g]
        if window.k > 0 and window.article_ids not in seen_windows:
            seen_windows.add(window.article_ids)
            plan.joints.extend(JointTerm(g, window.article_ids, bits) for bits in assignments(window.k))
        for article in group:
            for x in (1, 0):
                plan.conditionals.extend(
                    ConditionalTerm(article.article_id, g, x, window.article_ids, bits)
                    for bits in assignments(window.k)
                )
    return plan


def naive_joint_terms(plan: QuestionPlan) -> list[tuple[str, JointTerm]]:
    """The joint terms of the per-article method: each article requests its own full table."""
    return [
        (article.article_id, JointTerm(g, plan.windows[g].article_ids, bits))
        for g, group in plan.bins.items()
        if plan.windows[g].k > 0
        for article in group
        for bits in assignments(plan.windows[g].k)
    ]


def assemble(
    plan: QuestionPlan,
    answer: int,
    joint_values: Mapping[JointKey, float | None],
    conditional_values: Mapping[ConditionalKey, float | None],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """CIL rows (one per article) and joint-table rows (one per bin and assignment) from the
    answered terms. A missing or failed term (None) makes the CIL of the articles that need it
    null, with a reason; nothing raises."""
    cil_rows: list[dict[str, Any]] = []
    joint_rows: list[dict[str, Any]] = []
    for g, group in plan.bins.items():
        window = plan.windows[g]
        bits_all = assignments(window.k)
        pi: dict[str, float] | None = {"": 1.0}
        uniform, joint_reason = False, None
        if window.k > 0:
            raw = {bits: joint_values.get((window.article_ids, bits)) for bits in bits_all}
            if any(v is None for v in raw.values()):
                pi, joint_reason = None, "joint_term_failed"
            else:
                pi, uniform = normalize_joint(raw)  # type: ignore[arg-type]
            joint_rows.extend(
                {
                    "question_id": plan.question_id,
                    "bin": g,
                    "bits": bits,
                    "window_ids": list(window.article_ids),
                    "q_raw": raw[bits],
                    "pi": pi[bits] if pi is not None else None,
                    "uniform_fallback": uniform,
                }
                for bits in bits_all
            )
        for article in group:
            row: dict[str, Any] = {
                "question_id": plan.question_id,
                "article_id": article.article_id,
                "bin": g,
                "window_ids": list(window.article_ids),
                "k": window.k,
                "k_raw": window.k_raw,
                "truncated": window.truncated,
                "p_do1": None,
                "p_do0": None,
                "cil": None,
                "joint_uniform_fallback": uniform,
                "status": "ok",
                "reason": None,
            }
            c1 = {bits: conditional_values.get((article.article_id, 1, bits)) for bits in bits_all}
            c0 = {bits: conditional_values.get((article.article_id, 0, bits)) for bits in bits_all}
            if pi is None:
                row.update(status="failed", reason=joint_reason)
            elif any(v is None for v in (*c1.values(), *c0.values())):
                row.update(status="failed", reason="conditional_term_failed")
            else:
                terms = cil_terms(pi, c1, c0, answer)  # type: ignore[arg-type]
                row.update(p_do1=terms.p_do1, p_do0=terms.p_do0, cil=terms.cil)
            cil_rows.append(row)
    return cil_rows, joint_rows


@dataclass(frozen=True)
class CostFormulas:
    """Spec §6, for r repeats: conditionals, per-article joints, shared joints. J_shared counts
    one table per non-empty bin with K > 0; the planner asks once per distinct window, which is
    fewer when the K_max cap gives two bins the same window (bin counts alone cannot tell)."""

    conditionals: int
    joint_naive: int
    joint_shared: int

    @property
    def naive(self) -> int:
        return self.conditionals + self.joint_naive

    @property
    def shared(self) -> int:
        return self.conditionals + self.joint_shared


def window_sizes(bin_counts: Mapping[int, int], w: int, k_max: int) -> dict[int, int]:
    """K_g = min(K_max, Σ_{h=g+1..g+w} n_h) for every non-empty bin g."""
    return {
        g: min(k_max, sum(bin_counts.get(h, 0) for h in range(g + 1, g + w + 1)))
        for g, n in bin_counts.items()
        if n > 0
    }


def cost_formulas(bin_counts: Mapping[int, int], w: int, k_max: int, r: int) -> CostFormulas:
    """C = r·Σ n_g·2·2^K_g; J_naive = r·Σ n_g·[K_g>0]·2^K_g; J_shared = r·Σ_{n_g>0} [K_g>0]·2^K_g."""
    sizes = window_sizes(bin_counts, w, k_max)
    return CostFormulas(
        conditionals=r * sum(bin_counts[g] * 2 * 2**k for g, k in sizes.items()),
        joint_naive=r * sum(bin_counts[g] * 2**k for g, k in sizes.items() if k > 0),
        joint_shared=r * sum(2**k for k in sizes.values() if k > 0),
    )
