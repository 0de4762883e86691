"""Rows read from a root, shaped for the templates: an item with its articles, a benchmark's
leaderboard with interval charts and drift lines, the evaluation page."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from udfs import svg_charts
from udfs.report_view import fmt, interval

BACKGROUND_LINES, BACKGROUND_CHARS = 6, 600
LETTERS = "ABCDEFGHIJKLMNOP"


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _articles(ids: list[str] | None, found: dict[str, dict], scores: list[float] | None = None) -> list[dict]:
    out = []
    for k, id_ in enumerate(ids or []):
        a = found.get(id_)
        out.append(
            {
                "id": id_,
                "title": (a["title"] or a["url"]) if a else "(not in corpus/articles)",
                "url": a["url"] if a else None,
                "host": (a["host"] or "") if a else "",
                "date": fmt(a["published_at"]) if a else "–",
                "score": fmt(scores[k]) if scores and k < len(scores) else None,
            }
        )
    return out


def _gold(item: dict[str, Any]) -> str:
    kind = item["type"]
    if kind in ("yesno", "mc") and item["gold_index"] is not None:
        return f"{LETTERS[item['gold_index']]}. {item['choices'][item['gold_index']]}"
    if kind == "binary_prob":
        return {1.0: "1 (it happened)", 0.0: "0 (it did not happen)"}.get(item["gold_value"], "–")
    if kind == "ordering":
        return " → ".join(LETTERS[i] for i in item["gold_order"] or [])
    return " | ".join(item["gold_texts"] or []) or "–"


def item_view(item: dict[str, Any], found: dict[str, dict]) -> dict[str, Any]:
    """One sampled item: question, choices with the gold one marked, gold, cutoff, its
    background (shortened) and its context, gold and evidence articles with titles and links."""
    background = [
        line if len(line) <= BACKGROUND_CHARS else line[:BACKGROUND_CHARS] + "…"
        for line in (item["background"] or [])[:BACKGROUND_LINES]
    ]
    hidden = max(0, len(item["background"] or []) - BACKGROUND_LINES)
    gold_index = item["gold_index"] if item["type"] in ("yesno", "mc") else None
    return {
        "id": item["item_id"],
        "task": item["task"],
        "split": item["split"],
        "type": item["type"],
        "question": item["question"] or "",
        "choices": [
            {"label": LETTERS[k], "text": c, "gold": k == gold_index}
            for k, c in enumerate(item["choices"] or [])
        ],
        "gold": _gold(item),
        "t_cut": fmt(item["t_cut"]),
        "t_resolve": fmt(item["t_resolve"]),
        "category": item["category"] or "–",
        "background": background,
        "background_hidden": hidden,
        "context": _articles(item["context_article_ids"], found, item["context_scores"]),
        "gold_articles": _articles(item["gold_article_ids"], found),
        "evidence": _articles(item["evidence_article_ids"], found),
    }


METRIC_COLUMNS = (
    ("accuracy", "accuracy [95% CI]"),
    ("brier", "Brier [95% CI]"),
    ("open_f1", "open F1 [95% CI]"),
)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "task": r["task"],
        "split": r["split"] or "–",
        "model": r["model"],
        "setting": r["setting"],
        "n": fmt(r["n"]),
        "accuracy": interval(r.get("accuracy"), r.get("accuracy_ci_low"), r.get("accuracy_ci_high")),
        "brier": interval(r.get("brier"), r.get("brier_ci_low"), r.get("brier_ci_high"))
        + (f" ({r['brier_tag']})" if r.get("brier_tag") and _known(r.get("brier")) else ""),
        "open_f1": interval(r.get("open_f1"), r.get("open_f1_ci_low"), r.get("open_f1_ci_high")),
        "order_f1": fmt(r.get("order_f1")),
        "refusals": fmt(r.get("refusal_rate")),
        "forecasting": fmt(r.get("forecasting")),
    }


def _charts(board: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per (task, split): each model and setting's accuracy (open F1 for open tasks) with its
    95% interval, on a 0–1 axis."""
    groups: dict[tuple[str, str], list[svg_charts.Interval]] = defaultdict(list)
    metric_of: dict[tuple[str, str], str] = {}
    for r in board:
        metric = "accuracy" if _known(r.get("accuracy")) else "open_f1" if _known(r.get("open_f1")) else None
        if metric is None or r["task"].startswith("All"):
            continue
        low, high = r.get(f"{metric}_ci_low"), r.get(f"{metric}_ci_high")
        key = (r["task"], r["split"] or "–")
        metric_of[key] = metric
        groups[key].append(
            svg_charts.Interval(
                f"{r['model']} · {r['setting']}",
                r[metric],
                low if _known(low) else None,
                high if _known(high) else None,
            )
        )
    return [
        {"title": f"{task} · {split}: {metric_of[task, split]}", "svg": svg_charts.intervals(rows)}
        for (task, split), rows in sorted(groups.items())
    ]


def _drift(drift: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per task: monthly accuracy of each model and setting."""
    by_task: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for r in drift:
        value = r["accuracy"] if _known(r["accuracy"]) else None
        by_task[r["task"]][f"{r['model']} · {r['setting']}"].append((f"{r['month']:%Y-%m}", value))
    return [{"title": task, "svg": svg_charts.lines(series)} for task, series in sorted(by_task.items())]


def leaderboard_view(board: list[dict[str, Any]], drift: list[dict[str, Any]]) -> dict[str, Any]:
    """A benchmark's leaderboard rows, their interval charts and its drift lines."""
    order = sorted(board, key=lambda r: (r["task"], r["split"] or "", r["model"], r["setting"]))
    return {"rows": [_row(r) for r in order], "charts": _charts(order), "drift": _drift(drift)}


def _audit_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for kind, k in sorted(entry.get("kinds", {}).items()):
        rows.append(
            {
                "kind": kind,
                "checked": "skipped" if k.get("skipped") else fmt(k.get("checked")),
                "violations": fmt(k.get("violations")) if not k.get("skipped") else "–",
                "examples": [str(e)[:300] for e in (k.get("examples") or [])[:3]],
            }
        )
    return rows


def audit_view(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    return {
        "n_items": fmt(entry.get("items")),
        "n_results": fmt(entry.get("results")),
        "violations": entry.get("violations", 0),
        "notes": entry.get("notes", []),
        "kinds": _audit_rows(entry),
    }


def evaluation_view(
    board: list[dict[str, Any]],
    drift: list[dict[str, Any]],
    audit: dict[str, Any] | None,
    pages: list[str],
    href: Callable[[str], str],
) -> dict[str, Any]:
    """The evaluation page: per evaluated benchmark (with or without a page of its own) its
    leaderboard, intervals and drift, then the audit of every benchmark."""
    names = sorted({r["benchmark"] for r in board} | set((audit or {}).get("benchmarks", {})))
    sections = []
    for name in names:
        rows = [r for r in board if r["benchmark"] == name]
        view = leaderboard_view(rows, [r for r in drift if r["benchmark"] == name])
        sections.append({"name": name, "href": href(name) if name in pages else None, **view})
    audits = [
        {"name": name, **audit_view(entry)}
        for name, entry in sorted((audit or {}).get("benchmarks", {}).items())
    ]
    return {"sections": sections, "audits": audits, "audit_present": audit is not None}
