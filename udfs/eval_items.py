"""The evaluation item: one schema every benchmark exports and the evaluation harness reads.

Each builder writes its native tables (``benchmarks/<name>/...``) and, beside them, its
questions as items in ``benchmarks/<name>/eval_items/`` with this schema. Types:

- ``yesno``: choices ``["Yes", "No"]``, ``gold_index`` 0 or 1;
- ``mc``: four (or more) choices, ``gold_index`` into them;
- ``binary_prob``: a resolved binary event, ``gold_value`` ∈ {0, 1}, scored as a probability;
- ``ordering``: choices to arrange, ``gold_order`` = choice indexes in chronological order;
- ``open``: free-text answers compared with ``gold_texts`` (OpenForecast STF/LTF/AQA, TLB open).

``t_cut`` is the information cutoff (UTC, exclusive): nothing published at or after it may reach
a forecaster. ``gold_article_ids`` are never returned by retrieval.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

UTC_TS = pa.timestamp("us", tz="UTC")
TYPES = ("yesno", "mc", "binary_prob", "ordering", "open")
YES_NO = ["Yes", "No"]

EVAL_ITEM_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # unique within the benchmark
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),  # e.g. tf, mc, mcnc, vqa, stf, detail, order, binary
        pa.field("split", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),  # one of TYPES
        pa.field("question", pa.string()),
        pa.field("background", pa.list_(pa.string())),  # given context lines (e.g. a timeline before the cut)
        pa.field("choices", pa.list_(pa.string())),
        pa.field("gold_index", pa.int32()),
        pa.field("gold_order", pa.list_(pa.int32())),
        pa.field("gold_value", pa.float64()),
        pa.field("gold_texts", pa.list_(pa.string())),
        pa.field("t_cut", UTC_TS, nullable=False),
        pa.field("t_resolve", UTC_TS),
        pa.field("context_article_ids", pa.list_(pa.string())),  # the articles the item may use, if fixed
        # a builder's score of each context article, in the same order (PROPHET: its CIL; null:
        # none); the cil_high / cil_low settings show the highest / lowest scored
        pa.field("context_scores", pa.list_(pa.float64())),
        pa.field("gold_article_ids", pa.list_(pa.string())),
        # where the answer lies inside the allowed context, when the builder knows (TCELongBench:
        # a detail question's source article and date, an order problem's three dates): the
        # retriever metrics count hits on them and long-context trimming never drops those days
        pa.field("evidence_article_ids", pa.list_(pa.string())),
        pa.field("evidence_dates", pa.list_(pa.date32())),
        pa.field("category", pa.string()),
        pa.field("source_id", pa.string()),  # the builder's own id of the question
        # what retrieval searches for, written by the builder (e.g. the event's title and the
        # question's content); null: the harness's own query from the question
        pa.field("query", pa.string()),
    ]
)


class InvalidItemError(ValueError):
    """An evaluation item that breaks the contract above."""


def validate_item(item: dict[str, Any]) -> None:
    """Raise InvalidItemError when an item's gold does not fit its type or its cutoff is missing."""
    kind = item.get("type")
    if kind not in TYPES:
        raise InvalidItemError(f"{item.get('item_id')}: type {kind!r} not in {TYPES}")
    if item.get("t_cut") is None:
        raise InvalidItemError(f"{item['item_id']}: no t_cut")
    choices = item.get("choices") or []
    if kind in ("yesno", "mc"):
        if kind == "yesno" and list(choices) != YES_NO:
            raise InvalidItemError(f"{item['item_id']}: yes/no choices must be {YES_NO}")
        if kind == "mc" and (len(choices) < 2 or len(set(choices)) != len(choices)):
            raise InvalidItemError(f"{item['item_id']}: MC choices must be distinct")
        gold = item.get("gold_index")
        if gold is None or not 0 <= gold < len(choices):
            raise InvalidItemError(f"{item['item_id']}: gold_index out of range")
    elif kind == "binary_prob":
        if item.get("gold_value") not in (0.0, 1.0):
            raise InvalidItemError(f"{item['item_id']}: binary gold_value must be 0 or 1")
    elif kind == "ordering":
        order = list(item.get("gold_order") or [])
        if sorted(order) != list(range(len(choices))) or len(choices) < 2:
            raise InvalidItemError(f"{item['item_id']}: gold_order must be a permutation of the choices")
    elif not item.get("gold_texts"):
        raise InvalidItemError(f"{item['item_id']}: open items need gold_texts")
    scores = item.get("context_scores")
    if scores is not None and len(scores) != len(item.get("context_article_ids") or []):
        raise InvalidItemError(f"{item['item_id']}: context_scores must match context_article_ids")
    overlap = set(item.get("context_article_ids") or []) & set(item.get("gold_article_ids") or [])
    if overlap:
        raise InvalidItemError(
            f"{item['item_id']}: gold articles inside the allowed context: {sorted(overlap)[:3]}"
        )


def items_table(items: list[dict[str, Any]]) -> pa.Table:
    """Validate and build the Arrow table (missing optional fields become null)."""
    for item in items:
        validate_item(item)
    ids = [i["item_id"] for i in items]
    if len(set(ids)) != len(ids):
        raise InvalidItemError("item_id repeats")
    rows = [{f.name: item.get(f.name) for f in EVAL_ITEM_SCHEMA} for item in items]
    return pa.Table.from_pylist(rows, schema=EVAL_ITEM_SCHEMA)
