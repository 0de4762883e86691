"""Pure pieces of the benchmark report (``pipelines.report``): the funnel of a build, seeded
samples that keep pages small, and the formatting of values for HTML.

The funnel has one step per LLM stage (requests in, answered, failed by reason; from the card's
``llm_cost``) and one per builder step that dropped rows (rejected by reason, in the step's own
unit; from the ``rejected`` table), then the items written. The card does not record how many
rows a builder step read, so those steps show what they dropped, not what they kept.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from udfs import svg_charts


@dataclass
class Step:
    """One step of a build: rows in and kept when recorded, rejections by reason."""

    stage: str
    unit: str
    rows_in: int | None = None
    kept: int | None = None
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def funnel(
    card: Mapping[str, Any], rejected: Mapping[tuple[str, str, str], int], items: int | None
) -> list[Step]:
    """The steps of a build from its card and its rejected rows counted by (stage, unit,
    reason); ``items`` (the evaluation items written, None when the benchmark wrote none) ends it."""
    steps: list[Step] = []
    for name, cost in (card.get("llm_cost") or {}).get("stages", {}).items():
        failed = dict(cost.get("failures_by_reason") or {})
        rows = int(cost.get("rows", 0))
        steps.append(
            Step(name.split("/", 1)[-1], "LLM request", rows, rows - int(cost.get("failed", 0)), failed)
        )
    grouped: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (stage, unit, reason), n in rejected.items():
        grouped[stage, unit][reason] = grouped[stage, unit].get(reason, 0) + n
    steps += [Step(stage, unit, rejected=dict(sorted(r.items()))) for (stage, unit), r in grouped.items()]
    steps.sort(key=lambda s: (s.stage, s.unit != "LLM request", s.unit))
    if items is not None:
        steps.append(Step("eval_items", "item", None, items))
    return steps


def funnel_colors(steps: list[Step]) -> dict[str, str]:
    """The colour of each rejection reason in the funnel chart (for its legend)."""
    return svg_charts.reason_colors([r for s in steps for r in s.rejected])


def funnel_svg(steps: list[Step]) -> str:
    """The funnel as share bars: kept in green, each rejection reason in its own colour."""
    colors = funnel_colors(steps)
    bars = []
    for s in steps:
        segments = [svg_charts.Segment("kept", s.kept or 0, svg_charts.KEPT)]
        segments += [svg_charts.Segment(r, n, colors[r]) for r, n in s.rejected.items()]
        if s.rows_in is not None:
            note = f"{s.rows_in:,} in, {s.kept:,} kept"
        elif s.kept is not None:
            note = f"{s.kept:,} written"
        else:
            note = f"{s.rejected_total:,} dropped"
        bars.append(svg_charts.Bar(f"{s.stage} ({s.unit})", note, segments))
    return svg_charts.share_bars(bars)


def sample_ids(keyed: Iterable[tuple[str, str]], n: int, seed: int) -> list[str]:
    """Up to ``n`` ids out of (group, id) pairs, spread over the groups in turn (every task
    shows), each group shuffled by ``seed``; the same inputs give the same sample."""
    groups: dict[str, list[str]] = defaultdict(list)
    for group, id_ in keyed:
        groups[group].append(id_)
    rng = random.Random(seed)
    queues = []
    for group in sorted(groups):
        ids = sorted(set(groups[group]))
        rng.shuffle(ids)
        queues.append(ids)
    picked: list[str] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop())
    return picked


def fmt(value: Any, digits: int = 3) -> str:
    """A value as report text: ``–`` for none/NaN, rounded floats, ISO dates, thousands marks."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return (
            value.strftime("%Y-%m-%d %H:%M") if (value.hour, value.minute) != (0, 0) else f"{value:%Y-%m-%d}"
        )
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def interval(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """``0.667 [0.000, 1.000]``, or the value alone without an interval."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if low is None or high is None or any(math.isnan(v) for v in (low, high)):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


QUALITY_TITLES = {
    "items": "items",
    "tasks": "items per task",
    "rejected_by_quality_check": "rejected by the question checks",
    "near_duplicate_rate": "near-duplicate rate",
    "yes_no_balance": "yes/no answers",
    "gold_option_position": "gold option position",
    "binary_outcome_balance": "binary outcomes (1 = happened)",
    "category_mix": "categories",
    "question_openers": "question openers",
    "question_words": "question length (words)",
    "horizon_days": "horizon t_resolve − t_cut (days)",
    "items_per_source": "items per source article or event",
    "paper": "the paper's own figures",
}


SPREAD = ("sources", "min", "median", "mean", "p90", "max")  # cards are stored with sorted keys


def quality_rows(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The card's quality section as (title, text) rows, known keys first in a fixed order;
    shares print as ``Yes 6 (50%)``, spreads as ``min 3 · median 5 · …`` (in that order)."""
    keys = [k for k in QUALITY_TITLES if k in section] + sorted(k for k in section if k not in QUALITY_TITLES)
    rows = []
    for key in keys:
        value = section[key]
        if key == "near_duplicate_rate" and isinstance(value, int | float):
            text = f"{value:.1%}"
        elif (
            isinstance(value, Mapping)
            and value
            and all(isinstance(v, Mapping) and {"n", "share"} <= set(v) for v in value.values())
        ):
            text = ", ".join(f"{k} {v['n']:,} ({v['share']:.0%})" for k, v in value.items())
        elif isinstance(value, Mapping):
            order = sorted(value, key=lambda k: (SPREAD.index(k) if k in SPREAD else len(SPREAD), k))
            text = " · ".join(f"{k} {fmt(value[k], 2)}" for k in order) or "none"
        else:
            text = fmt(value, 2)
        rows.append((QUALITY_TITLES.get(key, key), text))
    return rows
