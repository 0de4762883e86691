"""S9 — the benchmark tables and the evaluation items from the final questions.

Choices are shuffled with the run's seed; every item's context is its TCE's articles of days
1..n-1 (``context_articles``) and its cutoff ``t_cut`` is 00:00 UTC of the last day t_n. Detail
gold dates must lie on or before t_(n-1) and forecast gold dates on t_n (asserted), and
``check_items`` stops the build with ``LeakageError`` before anything is written when a context
holds an article dated on or after its cutoff.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from udfs.tcelongbench import finalize, tables
from udfs.tcelongbench.context import check_items, context_articles
from udfs.tcelongbench.tables import DETAIL, FORECAST, NAME, ORDER
from udfs.timeutil import to_utc

ORDER_QUESTION = "Arrange the following events in chronological order."


def assemble(
    tces: Sequence[dict[str, Any]],
    tce_articles: Sequence[dict[str, Any]],
    day_summaries: Sequence[dict[str, Any]],
    key_points: Sequence[dict[str, Any]],
    questions: Sequence[dict[str, Any]],
    splits: Mapping[str, str],
    seed: int,
) -> tuple[dict[str, pa.Table], list[dict[str, Any]]]:
    """The benchmark tables by name and the evaluation items (``udfs.eval_items`` rows)."""
    tce_by_id = {t["tce_id"]: t for t in tces}
    context = context_articles(tce_articles, tces)
    context_ids: dict[str, list[str]] = defaultdict(list)
    for row in context:
        context_ids[row["tce_id"]].append(row["article_id"])
    qa_rows: dict[str, list[dict[str, Any]]] = {DETAIL: [], ORDER: [], FORECAST: []}
    items: list[dict[str, Any]] = []
    for q in questions:
        t = tce_by_id[q["tce_id"]]
        t_n, cutoff = t["dates"][-1], t["dates"][-2]
        base = {
            "qa_id": q["qa_id"],
            "tce_id": q["tce_id"],
            "split": splits[q["tce_id"]],
            "task": q["task"],
            "cutoff_date": cutoff,
            "t_n": t_n,
        }
        item = {
            "benchmark": NAME,
            "split": base["split"],
            "t_cut": to_utc(t_n),
            "context_article_ids": context_ids[q["tce_id"]],
            "source_id": q["qa_id"],
            "item_id": q["qa_id"],
            "task": q["task"],
        }
        if q["task"] == ORDER:
            row, extra = _order(q, seed)
            qa_rows[ORDER].append({**base, **row})
            items.append({**item, **extra})
            continue
        row, choices, gold_index = _multiple_choice(q, seed)
        if q["task"] == DETAIL:
            if q["date"] > cutoff:
                raise AssertionError(f"{q['qa_id']}: detail gold date after t_(n-1)")
            qa_rows[DETAIL].append({**base, **row})
            # The gold article lies inside the allowed context (finding it is the task), so it is
            # not listed as an excluded gold article; qa_detail keeps gold_article_id/gold_date.
            items.append(
                {
                    **item,
                    "type": "mc",
                    "question": q["question"],
                    "choices": choices,
                    "gold_index": gold_index,
                    "evidence_article_ids": [q["gold_article_id"]],
                    "evidence_dates": [q["date"]],
                }
            )
            continue
        if q["date"] != t_n:
            raise AssertionError(f"{q['qa_id']}: forecast gold date is not t_n")
        qa_rows[FORECAST].append(
            {
                **base,
                **row,
                "open_answer": q["answer"],
                "votes": q["votes"],
                "votes_passed": q["votes_passed"],
            }
        )
        forecast = {
            **item,
            "t_resolve": to_utc(t_n + dt.timedelta(days=1)),
            "gold_article_ids": [q["gold_article_id"]],
            "question": q["question"],
        }
        items.append({**forecast, "type": "mc", "choices": choices, "gold_index": gold_index})
        items.append(
            {
                **forecast,
                "item_id": q["qa_id"] + ":open",
                "task": "forecast_open",
                "type": "open",
                "gold_texts": [q["answer"]],
            }
        )
    check_items(items, {r["article_id"]: r["date"] for r in tce_articles})
    out = {
        "tce": pa.Table.from_pylist([{**t, "split": splits[t["tce_id"]]} for t in tces], schema=tables.TCE),
        "tce_article": pa.Table.from_pylist(list(tce_articles), schema=tables.TCE_ARTICLE),
        "context": pa.Table.from_pylist(context, schema=tables.CONTEXT),
        "day_summary": pa.Table.from_pylist(list(day_summaries), schema=tables.DAY_SUMMARY),
        "key_point": pa.Table.from_pylist(list(key_points), schema=tables.KEY_POINT),
        "qa_detail": pa.Table.from_pylist(qa_rows[DETAIL], schema=tables.QA_DETAIL),
        "qa_order": pa.Table.from_pylist(qa_rows[ORDER], schema=tables.QA_ORDER),
        "qa_forecast": pa.Table.from_pylist(qa_rows[FORECAST], schema=tables.QA_FORECAST),
    }
    return out, items


def _order(q: dict[str, Any], seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An order problem's ``qa_order`` columns and its ``ordering`` item fields (points shuffled)."""
    perm, gold, letters = finalize.shuffle_order(len(q["points"]), q["qa_id"], seed)
    choices = [q["points"][i] for i in perm]
    row = {
        "entity": q["entity"],
        "choices": choices,
        "kp_ids": [q["kp_ids"][i] for i in perm],
        "choice_dates": [q["dates"][i] for i in perm],
        "gold_order": letters,
        "gold_dates": list(q["dates"]),
        "votes": q["votes"],
        "votes_passed": q["votes_passed"],
    }
    item = {
        "type": "ordering",
        "question": ORDER_QUESTION,
        "choices": choices,
        "gold_order": gold,
        "evidence_dates": list(q["dates"]),
    }
    return row, item


def _multiple_choice(q: dict[str, Any], seed: int) -> tuple[dict[str, Any], list[str], int]:
    """A detail or forecast question's shared ``qa_*`` columns, its shuffled choices and the
    position of the correct one."""
    perm, letter = finalize.shuffle_choices(q["choices"], q["qa_id"], seed)
    choices = [q["choices"][i] for i in perm]
    row = {
        "question": q["question"],
        "choices": choices,
        "choice_types": [q["choice_types"][i] for i in perm],
        "answer_letter": letter,
        "gold": q["answer"],
        "kp_ids": q["kp_ids"],
        "key_point": q["point"],
        "gold_article_id": q["gold_article_id"],
        "gold_date": q["date"],
        "background2_article_id": q["background2_article_id"],
        "background2_date": q["background2_date"],
        "evidence_sentence": q["evidence_sentence"],
        "evidence_match": q["evidence_match"],
    }
    return row, choices, perm.index(0)
