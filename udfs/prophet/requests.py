"""The request tables of the two CIL stages and the term values read back from their answers.

``plan_requests`` turns the planned terms of every question (``udfs.prophet.plan``) into the
rows the joint and the conditional stage run over (the stages add the r repeats).
``term_values`` reads the stage outputs back: each term's probability of Yes averaged over its r
sample slots, where a retry of a failed repeat fills that repeat's slot (column ``slot``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from udfs.prophet.plan import QuestionPlan

JOINT_REQUESTS = pa.schema(
    [
        pa.field("question_id", pa.string()),
        pa.field("bin", pa.int32()),
        pa.field("bits", pa.string()),
        pa.field("window_ids", pa.list_(pa.string())),
    ]
)
CONDITIONAL_REQUESTS = pa.schema(
    [*JOINT_REQUESTS, pa.field("article_id", pa.string()), pa.field("x", pa.int8())]
)


def plan_requests(plans: Mapping[str, QuestionPlan]) -> tuple[pa.Table, pa.Table]:
    """The request tables of the CIL stages: one row per unique joint term and per conditional
    term of every question."""
    joints = [
        {"question_id": qid, "bin": t.bin, "bits": t.bits, "window_ids": list(t.window_ids)}
        for qid, plan in plans.items()
        for t in plan.joints
    ]
    conditionals = [
        {
            "question_id": qid,
            "bin": t.bin,
            "bits": t.bits,
            "window_ids": list(t.window_ids),
            "article_id": t.article_id,
            "x": t.x,
        }
        for qid, plan in plans.items()
        for t in plan.conditionals
    ]
    return (
        pa.Table.from_pylist(joints, schema=JOINT_REQUESTS),
        pa.Table.from_pylist(conditionals, schema=CONDITIONAL_REQUESTS),
    )


def slot(row: Mapping[str, Any]) -> int:
    """The sample slot an output row answers: its ``slot`` (a retry) or its sample index."""
    return row["slot"] if row.get("slot") is not None else row["sample_index"]


def term_probability(row: Mapping[str, Any], estimator: str) -> float:
    """P(Yes) of one answered term: the parsed decimal, or P(Yes)/(P(Yes)+P(No)) for logprob."""
    if estimator == "verbalized":
        return row["prob"]
    return row["option_probs"][row["options"].index("Yes")]


def joint_key(row: Mapping[str, Any]) -> tuple:
    """A joint term within its question: (window article ids, assignment)."""
    return (tuple(row["window_ids"]), row["bits"])


def conditional_key(row: Mapping[str, Any]) -> tuple:
    """A conditional term within its question: (article id, x, assignment)."""
    return (row["article_id"], row["x"], row["bits"])


def term_values(
    outputs: list[pa.Table], key: Callable[[Mapping[str, Any]], tuple], r: int, estimator: str
) -> dict[tuple, float | None]:
    """Each term's mean over its r sample slots (a retry fills its slot); None when a slot failed
    for good. ``outputs`` are a stage's first output and its retries' outputs; keys are
    ``(question_id, *key(row))``."""
    slots: dict[tuple, dict[int, float]] = defaultdict(dict)
    for out in outputs:
        for row in out.filter(out.column("parse_ok")).to_pylist():
            slots[(row["question_id"], *key(row))][slot(row)] = term_probability(row, estimator)
    terms = {(row["question_id"], *key(row)) for row in outputs[0].to_pylist()}
    return {t: math.fsum(slots[t].values()) / r if len(slots[t]) == r else None for t in terms}
