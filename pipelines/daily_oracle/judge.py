"""Steps 5–6: the seven-principle filter (a question is kept with at least 13 of 14 points) and
the category of every kept question (a choice request over the 11 labels; it never filters).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from pipelines.builders import Build
from pipelines.daily_oracle.config import Config
from pipelines.daily_oracle.qa import article_text
from pipelines.daily_oracle.stages import failure, run_stage
from pipelines.daily_oracle.state import State
from pipelines.llm.ledger import failure_reason
from udfs.daily_oracle.parsing import OTHER, normalise_category
from udfs.daily_oracle.questions import keep
from udfs.daily_oracle.rows import date_label
from udfs.daily_oracle.units import Question, Rejection

log = logging.getLogger("augury.daily_oracle")


def score(b: Build[Config], s: State) -> None:
    """The judge's points: one request per article with a live question (the judge always sees
    all four); a block without seven valid points or a total below 13 rejects its question."""
    by_article: dict[str, list[Question]] = defaultdict(list)
    for q in s.questions:
        by_article[q.article.id].append(q)
    units = [qs for qs in by_article.values() if any(q.alive for q in qs)]

    def variables(qs: list[Question]) -> dict[str, Any]:
        article = qs[0].article
        values = {
            "unit": article.id,
            "article": article_text(article, b.config),
            "publish_date": date_label(article.day),
        }
        for q in qs:
            values[f"question_{q.index}"], values[f"answer_{q.index}"] = q.question, q.answer
        return values

    out = run_stage(b.ledger, "filter", units, variables)
    for qs, row in zip(units, out, strict=True):
        for q in qs:
            if not q.alive:
                continue
            if not row["parse_ok"]:
                q.rejection = failure("filter", row)
                continue
            k = q.index - 1
            q.filter_raw = row["filter_blocks"][k]
            if row["filter_scores"][k] is None:
                q.rejection = Rejection(
                    "filter", "filter_scores_invalid", row["filter_errors"][k], q.filter_raw
                )
                continue
            q.scores = row["filter_scores"][k]
            if not keep(q.scores):
                detail = f"total {sum(q.scores)}: {q.scores}"
                q.rejection = Rejection("filter", "filter_total_below_13", detail, q.filter_raw)


def categorise(b: Build[Config], s: State) -> None:
    """The category of each kept question (``assign_categories``)."""
    kept = [q for q in s.questions if q.alive]
    rows = run_stage(b.ledger, "category", kept, lambda q: {"unit": q.id, "question": q.question})
    assign_categories(kept, rows)


def assign_categories(kept: list[Question], rows: list[dict[str, Any]]) -> None:
    """Each question's category from its category row. A failed row, or a distribution with no
    probability on any label (it would resolve to a uniform tie, i.e. the first label), falls
    back to ``Other`` with the reason in ``category_fallback``."""
    for q, row in zip(kept, rows, strict=True):
        if row["parse_ok"] and row["option_mass"]:
            q.category = normalise_category(row["raw_text"])
            q.category_prob = max(row["option_probs"])
            continue
        q.category, q.category_prob = OTHER, None
        q.category_fallback = failure_reason(row) if not row["parse_ok"] else "no_label_mass"
        detail = row["parse_error"] if not row["parse_ok"] else "no probability on any label"
        log.warning("category of %s falls back to %s: %s", q.id, OTHER, detail)
