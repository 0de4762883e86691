"""From per-item results to the leaderboard and the drift tables (the baselines' rows: ``udfs.evaluate.baselines``).

One leaderboard row per (model, benchmark, task, split, setting): splits are never pooled —
PROPHET's L1, L2 and ``none`` are different populations, and a test split is not a train one. Brier values carry their convention
in ``brier_tag``: ``sum`` for yes/no and MC items (ForecastQA), ``binary_x100`` for binary
probability items (PROPHET's tables; divide by 100 for ``binary``, and ``sum = 2 · binary``).
"All" rows combine a benchmark's choice-type tasks per setting, micro (item-weighted) and macro
(mean of tasks). Baselines are computed from the gold labels of the evaluated items:

- ``baseline:uniform`` — equal probability on every option: Brier ``1 − 1/C`` (binary 0.25),
  accuracy = the expected accuracy of a uniform guess, ``1/C`` (ordering: every permutation
  equally likely);
- ``baseline:majority`` — all probability on the group's most frequent gold option (ordering:
  its most frequent gold order), measured on the same items, so it is a reference, not a model.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from udfs import metrics
from udfs.evaluate.scoring import CHOICE_TYPES
from udfs.ids import stable_seed

BASELINES = ("baseline:uniform", "baseline:majority")
ALL_MICRO, ALL_MACRO = "All (micro)", "All (macro)"

LEADERBOARD_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("benchmark", pa.string()),
        pa.field("task", pa.string()),
        pa.field("type", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("mode", pa.string()),
        pa.field("retriever", pa.string()),
        pa.field("answer_format", pa.string()),
        pa.field("forecasting", pa.bool_()),
        pa.field("split", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("runs", pa.int64()),  # answers per item (--runs); n counts answers, items × runs
        pa.field("n_answered", pa.int64()),
        pa.field("refusal_rate", pa.float64()),
        pa.field("ties", pa.int64()),
        pa.field("accuracy", pa.float64()),
        pa.field("accuracy_ci_low", pa.float64()),
        pa.field("accuracy_ci_high", pa.float64()),
        pa.field("accuracy_answered", pa.float64()),
        pa.field("accuracy_std", pa.float64()),  # over runs, when there are several
        pa.field("brier", pa.float64()),
        pa.field("brier_tag", pa.string()),
        pa.field("brier_ci_low", pa.float64()),
        pa.field("brier_ci_high", pa.float64()),
        pa.field("brier_answered", pa.float64()),
        pa.field("brier_std", pa.float64()),
        pa.field("order_f1", pa.float64()),
        pa.field("levenshtein", pa.float64()),
        pa.field("open_precision", pa.float64()),
        pa.field("open_recall", pa.float64()),
        pa.field("open_f1", pa.float64()),
        pa.field("open_f1_ci_low", pa.float64()),
        pa.field("open_f1_ci_high", pa.float64()),
        pa.field("open_f1_code", pa.float64()),
        pa.field("bleu", pa.float64()),
        pa.field("meteor", pa.float64()),
        pa.field("acc_doc", pa.float64()),
        pa.field("acc_date", pa.float64()),
        pa.field("acc_dates", pa.float64()),
        pa.field("n_post_cutoff", pa.int64()),
        pa.field("accuracy_post_cutoff", pa.float64()),
    ]
)

DRIFT_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("benchmark", pa.string()),
        pa.field("task", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("month", pa.date32()),
        pa.field("n", pa.int64()),
        pa.field("accuracy", pa.float64()),
        pa.field("brier", pa.float64()),
        pa.field("brier_tag", pa.string()),
        pa.field("ma5", pa.float64()),
        pa.field("yoy", pa.float64()),
        pa.field("after_model_cutoff", pa.bool_()),
    ]
)


# leaderboard column → result column it averages where present: short answers' word overlap,
# and the retriever measures Acc_Doc / Acc_Date / Acc_Dates (TCELongBench S10)
MEANS = {
    "bleu": "bleu",
    "meteor": "meteor",
    "acc_doc": "hit_doc",
    "acc_date": "hit_date",
    "acc_dates": "hit_dates",
}


def brier_tag(item_type: str) -> str | None:
    """The native Brier convention of an item type (None: no Brier)."""
    return {"yesno": "sum", "mc": "sum", "binary_prob": "binary_x100"}.get(item_type)


def native_brier(row: dict[str, Any]) -> float | None:
    """A result row's Brier value in its type's native convention."""
    tag = brier_tag(row["type"])
    if tag == "sum":
        return row["brier_sum"]
    if tag == "binary_x100":
        return metrics.scale_brier(row["brier_binary"], tag)
    return None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _group_key(row: dict[str, Any]) -> tuple:
    return (row["model"], row["benchmark"], row["task"], row["setting"])


def _board_key(row: dict[str, Any]) -> tuple:
    """A leaderboard row's group: the drift group, per split."""
    return (*_group_key(row), row["split"])


def _by_run(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Rows by run (``--runs``: repeated samples of the same answers; one run otherwise)."""
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row.get("run") or 0].append(row)
    return groups


def _std_over_runs(
    runs: dict[int, list[dict[str, Any]]], value: Callable[[dict[str, Any]], Any]
) -> float | None:
    """The sample standard deviation (ddof 1) of the per-run means (None for one run, or when a
    run has no value): PROPHET's mean ± std over runs."""
    values = [[v for r in group if (v := value(r)) is not None] for group in runs.values()]
    if len(values) < 2 or not all(values):
        return None
    return float(np.std([np.mean(v) for v in values], ddof=1))


def _per_item(rows: list[dict[str, Any]], column: str) -> list[float]:
    """One value per item — its mean over runs — so intervals resample items, not repeats."""
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row[column] is not None:
            values[row["item_id"]].append(row[column])
    return [float(np.mean(v)) for v in values.values()]


def _summarise(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """One leaderboard row from the result rows of one (model, benchmark, task, split, setting)."""
    first = rows[0]
    kinds = {r["type"] for r in rows}
    if len(kinds) != 1:
        raise ValueError(f"{_board_key(first)}: mixed item types {sorted(kinds)}")
    kind = first["type"]
    key = stable_seed(seed, *_board_key(first))
    answered = [r for r in rows if not r["refusal"]]
    runs = _by_run(rows)
    out: dict[str, Any] = {
        "model": first["model"],
        "benchmark": first["benchmark"],
        "task": first["task"],
        "type": kind,
        "setting": first["setting"],
        "mode": first["mode"],
        "retriever": first["retriever"],
        "answer_format": first["answer_format"],
        "forecasting": first["forecasting"],
        "split": first["split"],
        "n": len(rows),
        "runs": len(runs),
        "n_answered": len(answered),
        "refusal_rate": 1 - len(answered) / len(rows),
        "ties": sum(bool(r["tie"]) for r in rows),
    }
    correct = [r["correct"] for r in rows if r["correct"] is not None]
    if correct:
        out["accuracy"] = _mean(correct)
        out["accuracy_ci_low"], out["accuracy_ci_high"] = metrics.mean_ci(_per_item(rows, "correct"), key)
        out["accuracy_std"] = _std_over_runs(runs, lambda r: r["correct"])
        out["accuracy_answered"] = _mean([r["correct"] for r in answered])
    tag = brier_tag(kind)
    if tag:
        briers = [native_brier(r) for r in rows]
        out["brier"], out["brier_tag"] = _mean(briers), tag
        per_item = _per_item([{**r, "brier": native_brier(r)} for r in rows], "brier")
        out["brier_ci_low"], out["brier_ci_high"] = metrics.mean_ci(per_item, key + 1)
        out["brier_std"] = _std_over_runs(runs, native_brier)
        out["brier_answered"] = _mean([native_brier(r) for r in answered])
    if kind == "ordering":
        preds = [None if r["refusal"] else r["pred_order"] for r in rows]
        scores = metrics.order_metrics(preds, [r["gold_order"] for r in rows])
        out["order_f1"], out["levenshtein"] = scores["weighted_f1"], scores["levenshtein"]
    if kind == "open" and any(r["open_f1"] is not None for r in rows):
        f1 = [r["open_f1"] or 0.0 for r in rows]
        out["open_precision"] = _mean([r["open_precision"] or 0.0 for r in rows])
        out["open_recall"] = _mean([r["open_recall"] or 0.0 for r in rows])
        out["open_f1"] = _mean(f1)
        per_item = _per_item([{**r, "open_f1": r["open_f1"] or 0.0} for r in rows], "open_f1")
        out["open_f1_ci_low"], out["open_f1_ci_high"] = metrics.mean_ci(per_item, key + 2)
        out["open_f1_code"] = _mean([r["open_f1_code"] or 0.0 for r in rows])
    for column, source in MEANS.items():  # over the rows that have the value
        out[column] = _mean([float(r[source]) for r in rows if r.get(source) is not None])
    post = [r for r in rows if r["after_model_cutoff"]]
    out["n_post_cutoff"] = len(post) if any(r["after_model_cutoff"] is not None for r in rows) else None
    out["accuracy_post_cutoff"] = _mean([r["correct"] for r in post if r["correct"] is not None])
    return out


def _all_rows(board: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Micro and macro "All" rows per (model, benchmark, split, setting) over its choice-type tasks."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in board:
        if row["type"] in CHOICE_TYPES:
            groups[(row["model"], row["benchmark"], row["split"], row["setting"])].append(row)
    extra = []
    for parts in groups.values():
        if len(parts) < 2:
            continue
        tags = {p["brier_tag"] for p in parts}
        for name, combine in ((ALL_MICRO, metrics.micro_all), (ALL_MACRO, metrics.macro_all)):
            row = {
                k: parts[0][k]
                for k in (
                    "model",
                    "benchmark",
                    "split",
                    "setting",
                    "mode",
                    "retriever",
                    "answer_format",
                    "forecasting",
                )
            }
            row.update(
                task=name,
                type="all",
                n=sum(p["n"] for p in parts),
                n_answered=sum(p["n_answered"] for p in parts),
                accuracy=combine([(p["n"], p["accuracy"]) for p in parts]),
                accuracy_answered=None,
            )
            row["refusal_rate"] = 1 - row["n_answered"] / row["n"]
            if len(tags) == 1:
                row["brier"] = combine([(p["n"], p["brier"]) for p in parts])
                row["brier_tag"] = next(iter(tags))
            extra.append(row)
    return extra


def leaderboard(
    results: list[dict[str, Any]], seed: int = 0, extra: list[dict[str, Any]] | None = None
) -> pa.Table:
    """The leaderboard of result rows (models and baselines alike) plus ready-made ``extra``
    rows (``ordering_uniform``), sorted for reading."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        groups[_board_key(row)].append(row)
    board = [_summarise(rows, seed) for rows in groups.values()]
    board += _all_rows(board) + list(extra or [])
    board.sort(
        key=lambda r: (
            r["benchmark"],
            r["split"] or "",
            r["task"].startswith("All"),
            r["task"],
            r["setting"] != "baseline",
            r["model"],
            r["setting"],
        )
    )
    return pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in LEADERBOARD_SCHEMA} for r in board], LEADERBOARD_SCHEMA
    )


DRIFT_SUMMARY_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("benchmark", pa.string()),
        pa.field("task", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("model_cutoff", pa.date32()),
        pa.field("months", pa.int64()),
        pa.field("yearly_accuracy", pa.string()),  # JSON {year: unweighted mean of monthly accuracy}
        pa.field("yoy_avg", pa.float64()),
        pa.field("yoy_pre", pa.float64()),
        pa.field("yoy_post", pa.float64()),
    ]
)


def drift_tables(results: list[dict[str, Any]]) -> tuple[pa.Table, pa.Table]:
    """Daily Oracle's drift analysis per (model, benchmark, task, setting) over result rows that
    have an accuracy (baselines excluded): the monthly table (N, accuracy, Brier, 5-month
    trailing mean, YoY change, side of the model cutoff) and a summary (yearly accuracy, average
    YoY change overall and before/after the model's cutoff month)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        if row["mode"] != "baseline" and row["correct"] is not None:
            groups[_group_key(row)].append(row)
    monthly, summary = [], []
    for (model, benchmark, task, setting), rows in sorted(groups.items()):
        tag = brier_tag(rows[0]["type"])
        cutoff = rows[0].get("model_cutoff")
        cut_month = metrics.month_of(cutoff) if cutoff else None
        months = metrics.monthly_drift(
            [r["month"] for r in rows],
            [r["correct"] for r in rows],
            [native_brier(r) for r in rows] if tag else None,
        )
        for m in months:
            monthly.append(
                {
                    "model": model,
                    "benchmark": benchmark,
                    "task": task,
                    "setting": setting,
                    "month": m.month,
                    "n": m.n,
                    "accuracy": m.accuracy,
                    "brier": m.brier,
                    "brier_tag": tag,
                    "ma5": m.ma5,
                    "yoy": m.yoy,
                    "after_model_cutoff": None if cut_month is None else m.month >= cut_month,
                }
            )
        yoy = metrics.yoy_summary(months, cutoff)
        summary.append(
            {
                "model": model,
                "benchmark": benchmark,
                "task": task,
                "setting": setting,
                "model_cutoff": cutoff,
                "months": sum(m.n > 0 for m in months),
                "yearly_accuracy": json.dumps(
                    {str(y): round(v, 6) for y, v in metrics.yearly_accuracy(months).items()}
                ),
                **yoy,
            }
        )
    return (
        pa.Table.from_pylist(monthly, DRIFT_SCHEMA),
        pa.Table.from_pylist(summary, DRIFT_SUMMARY_SCHEMA),
    )
