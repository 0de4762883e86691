"""Per-item results (one row per item × model × setting) and how a forecaster's answer becomes one.

Choice-type items (``yesno``, ``mc``, ``binary_prob``) carry a probability per original option;
the prediction is the argmax (ties to the lowest original index, counted). A refusal (no usable
answer) is scored as a uniform forecast for Brier and as wrong for accuracy (ForecastQA R7,
Daily Oracle). Binary items score ``P(yes)`` with the binary Brier; every item also carries the
class-summed Brier (``= 2 · binary`` on binary items).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from udfs import metrics
from udfs.eval_items import UTC_TS

CHOICE_TYPES = ("yesno", "mc", "binary_prob")

RESULT_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("split", pa.string()),
        pa.field("type", pa.string(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("model", pa.string(), nullable=False),  # a model id, or baseline:<name>
        pa.field("backend", pa.string()),
        pa.field("setting", pa.string(), nullable=False),  # <mode>[-<retriever>].<answer format>
        pa.field("mode", pa.string(), nullable=False),  # closed_book | retrieval | gold_context | baseline
        pa.field("retriever", pa.string()),
        pa.field("answer_format", pa.string()),  # choice | verbalized | text | scratchpad | cot | generate
        pa.field("run", pa.int32()),  # which sample of a repeated generated answer (--runs), from 0
        pa.field("k", pa.int32()),
        pa.field(
            "forecasting", pa.bool_()
        ),  # False for gold_context (reading comprehension, not forecasting)
        pa.field("retrieved_ids", pa.list_(pa.string())),
        pa.field("retrieved_dates", pa.list_(UTC_TS)),
        pa.field("n_eligible", pa.int64()),
        pa.field("newest_context_at", UTC_TS),
        pa.field("permutation", pa.list_(pa.int32())),  # presented position j shows original option perm[j]
        pa.field("probs", pa.list_(pa.float64())),  # per original option (binary: [P(yes), P(no)])
        pa.field("option_mass", pa.float64()),  # raw probability mass on the option tokens (choice)
        pa.field("prediction", pa.int32()),
        pa.field("pred_order", pa.list_(pa.int32())),
        pa.field("gold_index", pa.int32()),
        pa.field("gold_order", pa.list_(pa.int32())),
        pa.field("gold_value", pa.float64()),
        pa.field("n_choices", pa.int32()),
        pa.field("correct", pa.float64()),
        pa.field("tie", pa.bool_()),
        pa.field("brier_sum", pa.float64()),
        pa.field("brier_binary", pa.float64()),
        pa.field("levenshtein", pa.float64()),
        pa.field("open_predictions", pa.list_(pa.string())),
        pa.field("open_stage1", pa.list_(pa.int32())),  # matched gold label per prediction, -1 none
        pa.field("open_stage2", pa.list_(pa.bool_())),
        pa.field("n_gold_texts", pa.int32()),
        pa.field("open_precision", pa.float64()),  # LRAE, tp_mode = paper
        pa.field("open_recall", pa.float64()),
        pa.field("open_f1", pa.float64()),
        pa.field("open_f1_code", pa.float64()),  # LRAE, tp_mode = code
        pa.field("bleu", pa.float64()),  # short open answers: BLEU-4 × 100 against the gold answers
        pa.field("meteor", pa.float64()),  # METEOR × 100, exact and stem matching
        # retriever measures (udfs.evaluate.retrieval_metrics); null when the item names no evidence
        pa.field("hit_doc", pa.bool_()),
        pa.field("hit_date", pa.bool_()),
        pa.field("hit_dates", pa.bool_()),
        pa.field("refusal", pa.bool_(), nullable=False),
        pa.field("refusal_reason", pa.string()),
        pa.field("prompt_id", pa.string()),
        pa.field("prompt_version", pa.int32()),
        pa.field("response_hash", pa.string()),
        pa.field("t_cut", UTC_TS, nullable=False),
        pa.field("t_resolve", UTC_TS),
        pa.field("month", pa.date32()),  # calendar month of t_resolve (t_cut when absent)
        pa.field("model_cutoff", pa.date32()),  # the model's knowledge cutoff, if known
        pa.field("after_model_cutoff", pa.bool_()),  # resolution (else cutoff) on/after it; null if unknown
    ]
)


def _month(item: dict[str, Any]) -> dt.date:
    return metrics.month_of(item["t_resolve"] or item["t_cut"])


def base_row(item: dict[str, Any], model_cutoff: dt.date | None) -> dict[str, Any]:
    """The item's own columns of a result row."""
    when = item["t_resolve"] or item["t_cut"]
    return {
        "item_id": item["item_id"],
        "benchmark": item["benchmark"],
        "task": item["task"],
        "split": item["split"],
        "type": item["type"],
        "category": item.get("category"),
        "gold_index": item.get("gold_index"),
        "gold_order": item.get("gold_order"),
        "gold_value": item.get("gold_value"),
        "n_choices": len(item.get("choices") or []) or None,
        "n_gold_texts": len(item.get("gold_texts") or []) or None,
        "t_cut": item["t_cut"],
        "t_resolve": item.get("t_resolve"),
        "month": _month(item),
        "model_cutoff": model_cutoff,
        "after_model_cutoff": None
        if model_cutoff is None
        else when.astimezone(dt.UTC).date() >= model_cutoff,
        "refusal": False,
    }


def gold_class(item: dict[str, Any]) -> int:
    """The gold option index of a choice-type item (binary: 0 = yes, 1 = no)."""
    if item["type"] == "binary_prob":
        return 0 if item["gold_value"] == 1.0 else 1
    return item["gold_index"]


def n_options(item: dict[str, Any]) -> int:
    """Option count of a choice-type item or of its result row (``n_choices``)."""
    if item["type"] == "binary_prob":
        return 2
    return len(item["choices"]) if "choices" in item else item["n_choices"]


def score_choice(item: dict[str, Any], probs: list[float] | None) -> dict[str, Any]:
    """Prediction, correctness and Brier of a choice-type item; ``probs`` (original option order)
    None means a refusal."""
    n = n_options(item)
    gold = gold_class(item)
    if probs is None:
        uniform = metrics.uniform_brier_sum(n)
        return {
            "probs": None,
            "prediction": None,
            "correct": 0.0,
            "tie": False,
            "brier_sum": uniform,
            "brier_binary": 0.25 if item["type"] == "binary_prob" else None,
        }
    if len(probs) != n:
        raise ValueError(f"{item['item_id']}: {len(probs)} probabilities for {n} options")
    prediction, tie = metrics.argmax_first(probs)
    return {
        "probs": probs,
        "prediction": prediction,
        "correct": float(prediction == gold),
        "tie": tie,
        "brier_sum": metrics.brier_sum(probs, gold),
        "brier_binary": metrics.brier_binary(probs[0], item["gold_value"])
        if item["type"] == "binary_prob"
        else None,
    }


def score_order(item: dict[str, Any], pred_order: list[int] | None) -> dict[str, Any]:
    """Exact-order correctness and Levenshtein distance of an ordering answer (None: invalid)."""
    gold = list(item["gold_order"])
    return {
        "pred_order": pred_order,
        "correct": float(pred_order is not None and list(pred_order) == gold),
        "levenshtein": float(metrics.order_distance(pred_order, gold)),
    }


def score_open(
    item: dict[str, Any], predictions: list[str], stage1: list[int | None], stage2: list[bool]
) -> dict[str, Any]:
    """LRAE precision/recall/F1 of one open item in both TP modes."""
    n_labels = len(item["gold_texts"])
    paper = metrics.open_prf(metrics.lrae_counts(stage1, stage2, n_labels, "paper"))
    code = metrics.open_prf(metrics.lrae_counts(stage1, stage2, n_labels, "code"))
    return {
        "open_predictions": predictions,
        "open_stage1": [-1 if m is None else m for m in stage1],
        "open_stage2": stage2,
        "open_precision": paper[0],
        "open_recall": paper[1],
        "open_f1": paper[2],
        "open_f1_code": code[2],
    }
