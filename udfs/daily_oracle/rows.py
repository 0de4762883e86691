"""Output rows of Daily Oracle built from its units: the selection row of a picked article, the
TF / MC row of a kept question, a day's counts (its completion marker) and the evaluation items.

Schemas: ``udfs.daily_oracle.tables``; evaluation items: ``udfs.eval_items``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from typing import Any

from udfs.daily_oracle.questions import LETTERS, mc_stem, shuffle_options
from udfs.daily_oracle.units import NAME, Article, Question
from udfs.eval_items import YES_NO


def date_label(day: dt.date) -> str:
    """``YYYY-MM-DD, Weekday`` as the authors' prompts show dates."""
    return f"{day.isoformat()}, {day.strftime('%A')}"


def selection_row(a: Article) -> dict[str, Any]:
    """The ``selection`` row of a picked article."""
    return {
        "article_id": a.id,
        "url": a.row["url"],
        "domain": a.row["host"],
        "title": a.row["title"],
        "published_at": a.row["published_at"],
        "selection": a.pick.selection,
        "draw_seed": a.pick.draw_seed,
        "cluster_id": a.pick.cluster_id,
        "cluster_size": a.pick.cluster_size,
        "cluster_mean_dist": a.pick.cluster_mean_dist,
        "day_articles": a.day_articles,
        "date": a.day,
    }


def question_row(q: Question, model: str, seed: int, versions: str) -> dict[str, Any]:
    """The output row of a kept question (``TF_SCHEMA`` or ``MC_SCHEMA``); an MC question's options
    are shuffled with ``seed`` (``questions.shuffle_options``)."""
    a = q.article
    row = {
        "question_id": q.id,
        "question_index": q.index,
        "question": q.question,
        "category": q.category,
        "category_prob": q.category_prob,
        "time_element": q.time.phrase,
        "time_element_end": q.time.end,
        "filter_scores": q.scores,
        "filter_total": sum(q.scores),
        "filter_raw": q.filter_raw,
        "article_id": a.id,
        "url": a.row["url"],
        "domain": a.row["host"],
        "title": a.row["title"],
        "text": a.row["text"],
        "published_at": a.row["published_at"],
        "selection": a.pick.selection,
        "summary": a.summary,
        "keypoint": a.keypoint,
        "model": model,
        "prompt_versions": versions,
        "date": a.day,
    }
    if not q.is_mc:
        return {**row, "answer": q.answer}
    choices, gold = shuffle_options(q.answer, q.distractors, seed, q.id)
    return {
        **row,
        "answer": LETTERS[gold],
        "answer_text": q.answer,
        **{f"choice_{letter}": c for letter, c in zip(LETTERS, choices, strict=True)},
        "mc_stem": mc_stem(q.question),
    }


def day_counts(
    day: dt.date, articles: list[Article], questions: list[Question], prefiltered: dict[str, Any]
) -> dict[str, Any]:
    """One day's counts, kept in its completion marker and summed up in the dataset card."""
    arts = [a for a in articles if a.day == day]
    qs = [q for q in questions if q.article.day == day]
    kept = [q for q in qs if q.alive]
    rejections = [x.rejection for x in [*arts, *qs] if x.rejection is not None]
    fallbacks = Counter(q.category_fallback for q in kept if q.category_fallback)
    return {
        "date": day.isoformat(),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "prefilter": prefiltered,
        "selected": len(arts),
        "selected_by_kind": dict(Counter(a.pick.selection for a in arts)),
        "rejected_articles": sum(a.rejection is not None for a in arts),
        "questions_generated": len(qs),
        "tf": sum(not q.is_mc for q in kept),
        "mc": sum(q.is_mc for q in kept),
        "rejected_questions": len(qs) - len(kept),
        "rejected_by_reason": dict(Counter(r.reason for r in rejections)),
        "category_fallbacks": dict(fallbacks),
        "engine_errors": sum(r.engine_error for r in rejections) + fallbacks["engine_error"],
    }


def eval_items(tf: Iterable[dict[str, Any]], mc: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every kept question as an evaluation item: the forecaster's cutoff is 00:00 UTC of the day
    before resolution (accessible documents are dated before d_res − 1, spec §5)."""
    items = []
    for task, rows in (("tf", tf), ("mc", mc)):
        for r in rows:
            resolve = dt.datetime(r["date"].year, r["date"].month, r["date"].day, tzinfo=dt.UTC)
            if task == "tf":
                choices, gold = list(YES_NO), YES_NO.index(r["answer"])
            else:
                choices, gold = [r[f"choice_{x}"] for x in LETTERS], LETTERS.index(r["answer"])
            items.append(
                {
                    "item_id": r["question_id"],
                    "benchmark": NAME,
                    "task": task,
                    "split": "test",
                    "type": "yesno" if task == "tf" else "mc",
                    "question": r["question"],
                    "choices": choices,
                    "gold_index": gold,
                    "t_cut": resolve - dt.timedelta(days=1),
                    "t_resolve": resolve,
                    "gold_article_ids": [r["article_id"]],
                    "category": r["category"],
                    "source_id": r["question_id"],
                }
            )
    return items
