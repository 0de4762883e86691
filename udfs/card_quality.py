"""The quality section of a dataset card: is the benchmark balanced, varied and clean?

The papers report answer balance, category mix, question lengths and horizons; a user deciding
whether to trust a generated benchmark needs the same figures for it. ``quality_section`` computes
them from the written evaluation items (``udfs.eval_items``) and the quality rejections of the
build; the paper's own figures, where its spec gives them, sit beside ours.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from udfs.quality import words

NEAR_DUPLICATE = "quality_near_duplicate"


def _spread(values: list[float]) -> dict[str, float] | None:
    """Min, median, mean, 90th percentile and max (None without values)."""
    if not values:
        return None
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {
        "min": round(ordered[0], 2),
        "median": round(statistics.median(ordered), 2),
        "mean": round(statistics.fmean(ordered), 2),
        "p90": round(p90, 2),
        "max": round(ordered[-1], 2),
    }


def _shares(counts: Counter[Any]) -> dict[str, dict[str, float]]:
    total = sum(counts.values())
    return {str(k): {"n": n, "share": round(n / total, 3)} for k, n in sorted(counts.items(), key=str)}


OPENER_SECOND = frozenset(("will", "many", "much", "did", "does", "is", "was"))
TOP_OPENERS = 6


def opener(question: str) -> str:
    """How a question opens, as the papers count it: "What will", "How many", "Who", "Will"."""
    first = question.split()[:2]
    if len(first) == 2 and first[1].casefold() in OPENER_SECOND and first[0].casefold() != "will":
        return f"{first[0].capitalize()} {first[1].casefold()}"
    return first[0].capitalize() if first else ""


def quality_section(
    items: pa.Table,
    rejected: Mapping[str, int],
    event_key: Callable[[dict[str, Any]], str | None] | None = None,
    paper: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The card's quality figures of a benchmark's ``items``. ``rejected`` counts the build's
    rejections by reason (the ``quality_*`` ones are reported), ``event_key`` maps an item to the
    source article or event it was made from, ``paper`` holds the paper's own figures."""
    rows = items.to_pylist()
    quality = {r: n for r, n in sorted(rejected.items()) if r.startswith("quality_")}
    section: dict[str, Any] = {
        "items": len(rows),
        "tasks": dict(sorted(Counter(r["task"] for r in rows).items())),
        "rejected_by_quality_check": quality,
        "near_duplicate_rate": round(
            quality.get(NEAR_DUPLICATE, 0) / (len(rows) + quality.get(NEAR_DUPLICATE, 0)), 3
        )
        if rows or quality.get(NEAR_DUPLICATE)
        else 0.0,
    }
    yes_no = Counter("Yes" if r["gold_index"] == 0 else "No" for r in rows if r["type"] == "yesno")
    if yes_no:
        section["yes_no_balance"] = _shares(yes_no)
    positions = Counter(
        "abcdefgh"[r["gold_index"]] for r in rows if r["type"] == "mc" and r["gold_index"] is not None
    )
    if positions:
        section["gold_option_position"] = _shares(positions)
    binary = Counter(
        int(r["gold_value"]) for r in rows if r["type"] == "binary_prob" and r.get("gold_value") is not None
    )
    if binary:
        section["binary_outcome_balance"] = _shares(binary)
    categories = Counter(r.get("category") for r in rows if r.get("category"))
    if categories:
        section["category_mix"] = _shares(categories)
    openers = Counter(opener(r["question"]) for r in rows if r["type"] != "ordering" and r["question"])
    if openers:
        total = sum(openers.values())
        section["question_openers"] = {
            k: {"n": n, "share": round(n / total, 3)} for k, n in openers.most_common(TOP_OPENERS)
        }
    section["question_words"] = _spread([float(len(words(r["question"] or ""))) for r in rows])
    horizons = [
        (r["t_resolve"] - r["t_cut"]) / dt.timedelta(days=1)
        for r in rows
        if r.get("t_resolve") and r.get("t_cut")
    ]
    section["horizon_days"] = _spread(horizons)
    if event_key is not None:
        per_source = Counter(k for r in rows if (k := event_key(r)) is not None)
        section["items_per_source"] = {
            "sources": len(per_source),
            **(_spread([float(n) for n in per_source.values()]) or {}),
        }
    if paper:
        section["paper"] = dict(paper)
    return section


def quality_markdown(section: Mapping[str, Any]) -> list[str]:
    """The quality section as Markdown lines."""
    lines = ["## Quality", "", f"- items: {section['items']}"]
    lines.append("- tasks: " + (", ".join(f"{k} {v}" for k, v in section["tasks"].items()) or "none"))
    rejected = section["rejected_by_quality_check"]
    lines.append(
        "- rejected by the question checks: "
        + (", ".join(f"{k} {v}" for k, v in rejected.items()) if rejected else "none")
    )
    lines.append(f"- near-duplicate rate: {section['near_duplicate_rate']:.1%}")
    for key, title in (
        ("yes_no_balance", "yes/no answers"),
        ("gold_option_position", "gold option position"),
        ("binary_outcome_balance", "binary outcomes (1 = happened)"),
        ("category_mix", "categories"),
        ("question_openers", "question openers"),
    ):
        if key in section:
            lines.append(
                f"- {title}: "
                + ", ".join(f"{k} {v['n']} ({v['share']:.0%})" for k, v in section[key].items())
            )
    for key, title in (
        ("question_words", "question length (words)"),
        ("horizon_days", "horizon t_resolve − t_cut (days)"),
        ("items_per_source", "items per source article or event"),
    ):
        value = section.get(key)
        if value:
            lines.append(f"- {title}: " + ", ".join(f"{k} {v}" for k, v in value.items()))
    if section.get("paper"):
        lines += ["", "The paper's own figures, for comparison:", ""]
        lines += [f"- {k}: {v}" for k, v in section["paper"].items()]
    return [*lines, ""]
