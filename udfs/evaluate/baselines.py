"""The reference baselines of the leaderboard, from the gold labels of the evaluated items:
``baseline:uniform`` (equal probability on every option; ordering: every permutation equally
likely) and ``baseline:majority`` (all probability on the group's most frequent gold option or
order). See ``udfs.evaluate.leaderboard`` for how their rows are summarised."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Any

from udfs import metrics
from udfs.evaluate.scoring import CHOICE_TYPES, gold_class, n_options


def baseline_results(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-item result rows of the uniform and majority baselines for choice-type and ordering
    items (the uniform ordering baseline is added to the leaderboard by ``ordering_uniform``)."""
    by_group: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        by_group[(item["benchmark"], item["task"], item["split"])].append(item)
    rows = []
    for group in by_group.values():
        kind = group[0]["type"]
        if kind in CHOICE_TYPES:
            majority = Counter(gold_class(i) for i in group).most_common()
            top = min(c for c, n in majority if n == majority[0][1])
            for item in group:
                n = n_options(item)
                gold = gold_class(item)
                for name, probs, correct in (
                    ("baseline:uniform", [1.0 / n] * n, 1.0 / n),
                    ("baseline:majority", [float(c == top) for c in range(n)], float(top == gold)),
                ):
                    rows.append(_baseline_row(item, name, probs=probs, correct=correct, gold=gold))
        elif kind == "ordering":
            counts = Counter(tuple(i["gold_order"]) for i in group).most_common()
            top = min(o for o, n in counts if n == counts[0][1])
            for item in group:
                rows.append(
                    _baseline_row(
                        item,
                        "baseline:majority",
                        pred_order=list(top),
                        correct=float(list(top) == list(item["gold_order"])),
                        levenshtein=float(metrics.levenshtein(list(top), list(item["gold_order"]))),
                    )
                )
    return rows


def _baseline_row(item: dict[str, Any], model: str, gold: int | None = None, **values: Any) -> dict[str, Any]:
    row = {
        "item_id": item["item_id"],
        "benchmark": item["benchmark"],
        "task": item["task"],
        "split": item["split"],
        "type": item["type"],
        "model": model,
        "setting": "baseline",
        "mode": "baseline",
        "retriever": None,
        "answer_format": None,
        "forecasting": True,
        "refusal": False,
        "tie": False,
        "gold_order": item.get("gold_order"),
        "after_model_cutoff": None,
        "open_f1": None,
    }
    probs = values.get("probs")
    if probs is not None:
        values["brier_sum"] = metrics.brier_sum(probs, gold)
        if item["type"] == "binary_prob":
            values["brier_binary"] = metrics.brier_binary(probs[0], item["gold_value"])
    return {**row, **values}


def ordering_uniform(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leaderboard rows of the uniform baseline on ordering tasks: every permutation of each
    item weighted equally (exact expectations of accuracy, F1 and distance)."""
    by_group: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        if item["type"] == "ordering":
            by_group[(item["benchmark"], item["task"], item["split"])].append(item)
    board = []
    for (benchmark, task, split), group in by_group.items():
        preds, golds, weights = [], [], []
        for item in group:
            gold = list(item["gold_order"])
            perms = list(itertools.permutations(range(len(gold))))
            preds += [list(p) for p in perms]
            golds += [gold] * len(perms)
            weights += [1.0 / len(perms)] * len(perms)
        scores = metrics.order_metrics(preds, golds, weights)
        board.append(
            {
                "model": "baseline:uniform",
                "benchmark": benchmark,
                "task": task,
                "type": "ordering",
                "setting": "baseline",
                "mode": "baseline",
                "forecasting": True,
                "split": split,
                "n": len(group),
                "n_answered": len(group),
                "refusal_rate": 0.0,
                "ties": 0,
                "accuracy": scores["accuracy"],
                "order_f1": scores["weighted_f1"],
                "levenshtein": scores["levenshtein"],
            }
        )
    return board
