"""OpenForecast questions as evaluation items (``udfs.eval_items``).

MCNC and MCAC are ``mc`` items (4 choices), VQA is ``yesno``, STF, LTF and AQA are ``open``
items with ``gold_texts``. ``background`` is the timeline before the cut; ``query`` is what the
evaluation searches for (``search_query``: the CE's title and the question's own content, since
the LTF, STF and MCNC question texts are fixed and would retrieve the same articles for every
item); ``t_cut`` is the cut
day at 00:00 UTC (``udfs.openforecast.temporal``): every dated background event ends by then and
no target is over before it, so retrieval strictly before ``t_cut`` cannot reveal a target.
``t_resolve`` is the end of the latest dated target, when one is dated.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from udfs.timeutil import to_utc

BENCHMARK = "openforecast"
ITEM_TYPES = {"mcnc": "mc", "mcac": "mc", "vqa": "yesno", "stf": "open", "ltf": "open", "aqa": "open"}
LTF_QUESTION = "What will happen next? List the coming events in chronological order."
QUERY_BACKGROUND = 2  # latest background events in the query of a task whose question text is fixed


def search_query(sample: dict[str, Any], title: str | None) -> str:
    """The retrieval query of one question: its CE's title, then what the question is about —
    the four candidate events (MCNC), the question itself (VQA names its candidate; MCAC and AQA
    are generated per target), or the latest background events (STF and LTF ask a fixed
    question about what comes next)."""
    task = sample["task"]
    if task == "mcnc":
        content = list(sample["choices"])
    elif task in ("vqa", "mcac", "aqa"):
        content = [sample["question"]]
    else:
        content = list(sample["background"])[-QUERY_BACKGROUND:]
    return " ".join(part for part in (title or "", *content) if part).strip()


def eval_item(sample: dict[str, Any], t_resolve: dt.date | None, title: str | None) -> dict[str, Any]:
    """The evaluation item of one question (``title``: its CE's)."""
    task = sample["task"]
    kind = ITEM_TYPES[task]
    return {
        "item_id": sample["sample_id"],
        "benchmark": BENCHMARK,
        "task": task,
        "split": sample["split"],
        "type": kind,
        "question": sample.get("question") or LTF_QUESTION,
        "background": list(sample["background"]),
        "choices": list(sample["choices"]) if kind != "open" else None,
        "gold_index": sample["gold_index"] if kind != "open" else None,
        "gold_texts": list(sample["gold_texts"]),
        "t_cut": to_utc(sample["t_cut"]),
        "t_resolve": to_utc(t_resolve) if t_resolve else None,
        "category": sample["category"],
        "source_id": sample["sample_id"],
        "query": search_query(sample, title),
    }
