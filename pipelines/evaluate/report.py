"""Outputs of an evaluation under ``<root>/eval/``:

- ``<benchmark>/<model>/results/setting=<setting>/`` — per-item results (R9), one partition per
  setting, so a rerun of one setting replaces only it and other models' results stay;
- ``<benchmark>/<model>/rejected/`` — items a setting could not evaluate, with the reason;
- ``leaderboard.parquet`` / ``leaderboard.md`` — every model's results found under ``eval/``
  plus the baselines;
- ``drift.parquet``, ``drift_summary.parquet``, ``drift.md``, ``drift.png`` — Daily Oracle's drift
  analysis; ``summary.json`` — the run's counts, retrieval log and configuration.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from udfs import storage
from udfs.evaluate.baselines import baseline_results, ordering_uniform
from udfs.evaluate.leaderboard import drift_tables, leaderboard
from udfs.evaluate.scoring import RESULT_SCHEMA
from udfs.layout import Layout

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("item_id", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("split", pa.string()),
        pa.field("reason", pa.string()),
    ]
)


def model_slug(model: str) -> str:
    """A directory-safe name for a model id (``org/Model-7B`` → ``org__Model-7B``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "__", model).strip("_") or "model"


def eval_uri(root: str, *parts: str) -> str:
    return Layout(root).eval(*parts)


Runs = set[tuple[str, str]]  # the (setting, split) pairs one evaluation run evaluated


def _others(uri: str, schema: pa.Schema, ran: Runs, partition_cols: list[str]) -> pa.Table:
    """The stored rows of ``uri`` whose (setting, split) this run did not evaluate; rows without
    a split (written before rows had one) go with the run's settings."""
    stored = storage.read_table(uri, schema, partition_cols=partition_cols)
    keys = pc.binary_join_element_wise(stored["setting"], pc.fill_null(stored["split"], ""), "\x1f")
    ours = pc.is_in(keys, value_set=pa.array([f"{s}\x1f{p}" for s, p in ran], pa.string()))
    legacy = pc.and_(
        pc.is_null(stored["split"]), pc.is_in(stored["setting"], pa.array(sorted({s for s, _ in ran})))
    )
    return stored.filter(pc.invert(pc.or_(ours, legacy))).select(schema.names)


def write_results(
    root: str, benchmark: str, model: str, rows: list[dict[str, Any]], ran: Runs | None = None
) -> None:
    """Per-item results of one benchmark and model. The (setting, split) pairs the run evaluated
    (``ran``; default: those of ``rows``) are replaced and every other pair's earlier results are
    kept, so runs over different ``--splits`` (PROPHET's L1, L2, none) coexist."""
    uri = eval_uri(root, benchmark, model_slug(model), "results")
    table = pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in RESULT_SCHEMA} for r in rows], RESULT_SCHEMA
    )
    ran = ran if ran is not None else {(r["setting"], r["split"]) for r in rows}
    kept = _others(uri, RESULT_SCHEMA, ran, ["setting"])
    storage.write_dataset(pa.concat_tables([kept, table]), uri, ["setting"], replace="all")


def write_rejected(root: str, benchmark: str, model: str, rows: list[dict[str, str]], ran: Runs) -> None:
    """The items a setting could not evaluate, with the reason; kept across runs like results."""
    uri = eval_uri(root, benchmark, model_slug(model), "rejected")
    table = pa.Table.from_pylist(
        [{f.name: r.get(f.name) for f in REJECTED_SCHEMA} for r in rows], REJECTED_SCHEMA
    )
    kept = _others(uri, REJECTED_SCHEMA, ran, [])
    storage.write_dataset(pa.concat_tables([kept, table]), uri, replace="all")


def result_tables(root: str) -> dict[str, list[str]]:
    """Benchmark → models with stored per-item results under ``eval/`` (``_runs`` and other
    ``_`` directories are the runs' caches, not results)."""
    base = eval_uri(root)
    found: dict[str, set[str]] = {}
    for uri in storage.list_files(base, ".parquet"):
        parts = PurePosixPath(uri[len(base) + 1 :]).parts
        if len(parts) >= 4 and parts[2] == "results" and not parts[0].startswith("_"):
            found.setdefault(parts[0], set()).add(parts[1])
    return {name: sorted(models) for name, models in sorted(found.items())}


def read_all_results(root: str) -> list[dict[str, Any]]:
    """Every per-item result under ``eval/`` (all benchmarks, all models)."""
    rows: list[dict[str, Any]] = []
    for benchmark, models in result_tables(root).items():
        for model in models:
            uri = eval_uri(root, benchmark, model, "results")
            rows += storage.read_table(uri, RESULT_SCHEMA, partition_cols=["setting"]).to_pylist()
    return rows


def build_leaderboard(results: list[dict[str, Any]], seed: int) -> pa.Table:
    """Models' results plus the uniform and majority baselines on the same items."""
    unique = list({(r["benchmark"], r["task"], r["item_id"]): r for r in results}.values())
    return leaderboard(results + baseline_results(unique), seed, extra=ordering_uniform(unique))


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


LEADERBOARD_COLUMNS = [
    ("benchmark", "benchmark"),
    ("task", "task"),
    ("split", "split"),
    ("model", "model"),
    ("setting", "setting"),
    ("n", "N"),
    ("accuracy", "acc"),
    ("accuracy_ci_low", "acc 95% lo"),
    ("accuracy_ci_high", "acc 95% hi"),
    ("accuracy_std", "acc std"),
    ("brier", "Brier"),
    ("brier_std", "Brier std"),
    ("brier_tag", "Brier tag"),
    ("refusal_rate", "refusals"),
    ("order_f1", "order F1"),
    ("levenshtein", "Lev."),
    ("open_f1", "open F1"),
    ("open_f1_code", "open F1 (code)"),
    ("bleu", "BLEU"),
    ("meteor", "METEOR"),
    ("acc_doc", "Acc_Doc"),
    ("acc_date", "Acc_Date"),
    ("acc_dates", "Acc_Dates"),
    ("forecasting", "forecasting"),
]


def leaderboard_markdown(board: pa.Table) -> str:
    """The leaderboard as a Markdown table (gold-context rows are reading comprehension)."""
    header = "| " + " | ".join(title for _, title in LEADERBOARD_COLUMNS) + " |"
    rule = "| " + " | ".join("---" for _ in LEADERBOARD_COLUMNS) + " |"
    lines = [
        "# Leaderboard",
        "",
        "Brier tags: `sum` = class-summed (uniform 0.5 yes/no, 0.75 four-way); `binary_x100` = "
        "(p − y)² × 100 (uniform 25). Refusals count as wrong and as uniform forecasts. "
        "`forecasting = False` marks gold-context rows (reading comprehension, not forecasting).",
        "",
        header,
        rule,
    ]
    for row in board.to_pylist():
        lines.append("| " + " | ".join(_fmt(row[col]) for col, _ in LEADERBOARD_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def drift_markdown(monthly: pa.Table, summary: pa.Table) -> str:
    lines = ["# Drift over time", "", "## Summary", ""]
    lines += [
        "| model | benchmark | task | setting | months | yearly accuracy | YoY avg % | pre-cutoff % | post-cutoff % |",
        "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in summary.to_pylist():
        lines.append(
            f"| {r['model']} | {r['benchmark']} | {r['task']} | {r['setting']} | {r['months']} | "
            f"{r['yearly_accuracy']} | {_fmt(r['yoy_avg'], 2)} | {_fmt(r['yoy_pre'], 2)} | {_fmt(r['yoy_post'], 2)} |"
        )
    lines += ["", "## Monthly", ""]
    lines += [
        "| model | benchmark | task | setting | month | N | accuracy | ma5 | Brier | YoY % |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in monthly.to_pylist():
        lines.append(
            f"| {r['model']} | {r['benchmark']} | {r['task']} | {r['setting']} | {r['month']:%Y-%m} | {r['n']} | "
            f"{_fmt(r['accuracy'])} | {_fmt(r['ma5'])} | {_fmt(r['brier'])} | {_fmt(r['yoy'], 2)} |"
        )
    return "\n".join(lines) + "\n"


def drift_png(monthly: pa.Table) -> bytes:
    """One panel per (benchmark, task): monthly accuracy (points) and its 5-month trailing mean
    (line) per (model, setting)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[tuple[str, str], dict[tuple[str, str], list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in monthly.to_pylist():
        panels[(r["benchmark"], r["task"])][(r["model"], r["setting"])].append(r)
    n = max(1, len(panels))
    fig, axes = plt.subplots(n, 1, figsize=(9, 3.2 * n), squeeze=False)
    for ax, ((benchmark, task), series) in zip(axes[:, 0], sorted(panels.items()), strict=False):
        for (model, setting), rows in sorted(series.items()):
            months = [r["month"] for r in rows]
            line = ax.plot(months, [r["ma5"] for r in rows], label=f"{model} · {setting} (ma5)")
            ax.scatter(months, [r["accuracy"] for r in rows], s=12, color=line[0].get_color(), alpha=0.6)
        ax.set_title(f"{benchmark} · {task}")
        ax.set_ylabel("accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7, loc="best")
    if not panels:
        axes[0, 0].text(0.5, 0.5, "no items with an accuracy", ha="center", va="center")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def write_reports(root: str, results: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """Leaderboard and drift outputs from every result under ``eval/``; returns their URIs."""
    board = build_leaderboard(results, seed)
    storage.write_table(board, eval_uri(root, "leaderboard.parquet"))
    storage.write_bytes(eval_uri(root, "leaderboard.md"), leaderboard_markdown(board).encode())
    monthly, summary = drift_tables(results)
    storage.write_table(monthly, eval_uri(root, "drift.parquet"))
    storage.write_table(summary, eval_uri(root, "drift_summary.parquet"))
    storage.write_bytes(eval_uri(root, "drift.md"), drift_markdown(monthly, summary).encode())
    storage.write_bytes(eval_uri(root, "drift.png"), drift_png(monthly))
    return {"leaderboard": board, "drift": monthly, "drift_summary": summary}
