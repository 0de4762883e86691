"""Evaluation metrics as pure functions: accuracy, Brier scores (tagged by convention), ordering
metrics, OpenForecast's LRAE precision/recall/F1, micro/macro "All", bootstrap intervals, and
Daily Oracle's drift statistics.

Brier conventions (every reported value carries its tag):

- ``sum``: ForecastQA's class-summed score ``Σ_c (p_c − y_c)²`` per item, range [0, 2]; a uniform
  forecast scores ``1 − 1/C`` (0.5 yes/no, 0.75 four-way);
- ``binary``: PROPHET's ``(p − y)²`` on P(yes), range [0, 1], uniform 0.25; on a binary item
  ``sum = 2 · binary``;
- ``binary_x100``: the binary score ×100, as PROPHET's tables print it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BRIER_TAGS = ("sum", "binary", "binary_x100")
TP_MODES = ("paper", "code")


# ----------------------------------------------------------------------------- choice items
def argmax_first(probs: Sequence[float]) -> tuple[int, bool]:
    """The most probable index (ties go to the lowest index) and whether there was a tie."""
    best = max(probs)
    winners = [i for i, p in enumerate(probs) if p == best]
    return winners[0], len(winners) > 1


def brier_sum(probs: Sequence[float], gold: int) -> float:
    """Class-summed Brier score of one item."""
    return float(sum((p - (1.0 if c == gold else 0.0)) ** 2 for c, p in enumerate(probs)))


def brier_binary(p_yes: float, outcome: float) -> float:
    """Binary Brier score of one probability forecast of an event with outcome 0 or 1."""
    return float((p_yes - outcome) ** 2)


def uniform_brier_sum(n_classes: int) -> float:
    """The class-summed Brier score of a uniform forecast over ``n_classes``: ``1 − 1/C``."""
    return 1.0 - 1.0 / n_classes


def scale_brier(binary_value: float, tag: str) -> float:
    """A binary Brier value expressed in one of the binary conventions."""
    if tag == "binary":
        return binary_value
    if tag == "binary_x100":
        return 100.0 * binary_value
    raise ValueError(f"tag {tag!r} is not a binary convention")


def accuracy(correct: Sequence[float]) -> float | None:
    """Share of correct items (refusals count as wrong); None for no items."""
    return float(np.mean(correct)) if len(correct) else None


# ----------------------------------------------------------------------------- ordering
def levenshtein(a: Sequence, b: Sequence) -> int:
    """Edit distance (insertions, deletions, substitutions) between two sequences."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


INVALID = -1  # the label of every position of an invalid ordering answer


def order_distance(pred: Sequence[int] | None, gold: Sequence[int]) -> int:
    """Levenshtein distance of a predicted order; an invalid answer (None) is as far as the
    sequence is long (every position wrong)."""
    return len(gold) if pred is None else levenshtein(list(pred), list(gold))


def order_metrics(
    preds: Sequence[Sequence[int] | None],
    golds: Sequence[Sequence[int]],
    weights: Sequence[float] | None = None,
) -> dict[str, float]:
    """TCELongBench's ordering metrics over items: exact-order accuracy, weighted F1 over the
    per-position labels pooled across items (sklearn ``average='weighted'``), and the mean
    Levenshtein distance. ``None`` is an invalid answer: distance = length, every position wrong.
    ``weights`` weigh items (the uniform baseline averages over all permutations with them)."""
    from sklearn.metrics import f1_score

    if not golds:
        raise ValueError("no items")
    w = np.ones(len(golds)) if weights is None else np.asarray(weights, dtype=np.float64)
    y_true, y_pred, y_w = [], [], []
    exact, dist = [], []
    for pred, gold, weight in zip(preds, golds, w, strict=True):
        labels = [INVALID] * len(gold) if pred is None else list(pred)
        y_true += list(gold)
        y_pred += labels
        y_w += [weight] * len(gold)
        exact.append(float(pred is not None and list(pred) == list(gold)))
        dist.append(order_distance(pred, gold))
    f1 = f1_score(
        y_true, y_pred, labels=sorted(set(y_true)), average="weighted", sample_weight=y_w, zero_division=0
    )
    return {
        "accuracy": float(np.average(exact, weights=w)),
        "weighted_f1": float(f1),
        "levenshtein": float(np.average(dist, weights=w)),
    }


# ----------------------------------------------------------------------------- open answers (LRAE)
@dataclass(frozen=True)
class LRAECounts:
    tp: int
    mtp: int
    fp: int
    fn: int


def lrae_counts(
    stage1: Sequence[int | None], stage2: Sequence[bool], n_labels: int, tp_mode: str = "paper"
) -> LRAECounts:
    """OpenForecast's LRAE counts for one sample.

    ``stage1[i]`` is the gold label index prediction i matched in stage 1 (None: no match);
    ``stage2[i]`` whether a stage-1 failure was accepted against retrieved evidence (ignored for
    stage-1 matches). Paper mode: TP = predictions accepted in stage 1, FP = predictions rejected
    by both stages. Code mode: TP = distinct labels hit in stage 1, FP = the remaining
    predictions not accepted in stage 2. FN = gold labels never matched in stage 1 (both)."""
    if tp_mode not in TP_MODES:
        raise ValueError(f"tp_mode must be one of {TP_MODES}")
    if len(stage1) != len(stage2):
        raise ValueError("stage1 and stage2 must have one entry per prediction")
    hit_labels = {m for m in stage1 if m is not None}
    if any(not 0 <= m < n_labels for m in hit_labels):
        raise ValueError("a stage-1 match names no gold label")
    matched = sum(m is not None for m in stage1)
    mtp = sum(bool(s2) for m, s2 in zip(stage1, stage2, strict=True) if m is None)
    tp = matched if tp_mode == "paper" else len(hit_labels)
    return LRAECounts(tp=tp, mtp=mtp, fp=len(stage1) - tp - mtp, fn=n_labels - len(hit_labels))


def open_prf(counts: LRAECounts) -> tuple[float, float, float]:
    """``P = (TP+MTP)/(TP+MTP+FP)``, ``R = (TP+MTP)/(TP+MTP+FN)``, F1 their harmonic mean; an
    empty prediction (or no hit at all) scores 0."""
    hits = counts.tp + counts.mtp
    p = hits / (hits + counts.fp) if hits + counts.fp else 0.0
    r = hits / (hits + counts.fn) if hits + counts.fn else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f1


# ----------------------------------------------------------------------------- "All" and intervals
def micro_all(parts: Sequence[tuple[int, float]]) -> float:
    """Item-weighted mean of per-type metrics: ``Σ N_t·m_t / Σ N_t``."""
    total = sum(n for n, _ in parts)
    if total == 0:
        raise ValueError("no items")
    return sum(n * m for n, m in parts) / total


def macro_all(parts: Sequence[tuple[int, float]]) -> float:
    """Unweighted mean of per-type metrics."""
    if not parts:
        raise ValueError("no parts")
    return sum(m for _, m in parts) / len(parts)


def bootstrap_ci(
    n_items: int,
    statistic: Callable[[np.ndarray], float],
    seed: int,
    resamples: int = 1000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(indexes)`` over items resampled with
    replacement (seeded, so reruns give the same interval)."""
    if n_items == 0:
        raise ValueError("no items")
    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n_items, n_items)) for _ in range(resamples)]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def mean_ci(values: Sequence[float], seed: int, resamples: int = 1000) -> tuple[float, float]:
    """Bootstrap interval of a mean (vectorised)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no items")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, (resamples, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


# ----------------------------------------------------------------------------- drift (Daily Oracle)
def month_of(when: dt.date | dt.datetime) -> dt.date:
    """The first day of the calendar month of a date or instant (UTC)."""
    if isinstance(when, dt.datetime):
        when = when.astimezone(dt.UTC) if when.tzinfo else when
    return dt.date(when.year, when.month, 1)


def _shift(month: dt.date, months: int) -> dt.date:
    index = month.year * 12 + month.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


@dataclass(frozen=True)
class MonthRow:
    month: dt.date
    n: int
    accuracy: float | None
    brier: float | None
    ma5: float | None
    yoy: float | None  # percent relative change of raw accuracy versus 12 months earlier


def monthly_drift(
    months: Sequence[dt.date], correct: Sequence[float], brier: Sequence[float] | None = None, window: int = 5
) -> list[MonthRow]:
    """Per calendar month from the first to the last month seen (empty months included with
    N = 0): N, accuracy, mean Brier, the trailing ``window``-month mean of accuracy over the
    months that have one (min_periods = 1), and the year-over-year relative change."""
    if not months:
        return []
    groups: dict[dt.date, list[int]] = {}
    for i, m in enumerate(months):
        groups.setdefault(month_of(m), []).append(i)
    first, last = min(groups), max(groups)
    span = []
    current = first
    while current <= last:
        span.append(current)
        current = _shift(current, 1)
    acc = {m: float(np.mean([correct[i] for i in groups[m]])) for m in groups}
    rows = []
    for m in span:
        trailing = [acc[x] for x in (_shift(m, -j) for j in range(window)) if x in acc]
        before = acc.get(_shift(m, -12))
        yoy = 100.0 * (acc[m] - before) / before if m in acc and before else None
        rows.append(
            MonthRow(
                month=m,
                n=len(groups.get(m, [])),
                accuracy=acc.get(m),
                brier=float(np.mean([brier[i] for i in groups[m]]))
                if brier is not None and m in groups
                else None,
                ma5=float(np.mean(trailing)) if trailing else None,
                yoy=yoy,
            )
        )
    return rows


def yearly_accuracy(rows: Sequence[MonthRow]) -> dict[int, float]:
    """Per year, the unweighted mean of its monthly accuracies (questions are not pooled)."""
    by_year: dict[int, list[float]] = {}
    for r in rows:
        if r.accuracy is not None:
            by_year.setdefault(r.month.year, []).append(r.accuracy)
    return {y: float(np.mean(v)) for y, v in sorted(by_year.items())}


def yoy_summary(rows: Sequence[MonthRow], model_cutoff: dt.date | None) -> dict[str, float | None]:
    """Average YoY change over all months that have one, and split at the model's knowledge
    cutoff month (pre: month < cutoff month; post: month ≥ it; None when unknown or empty)."""

    def mean(values: list[float]) -> float | None:
        return float(np.mean(values)) if values else None

    values = [(r.month, r.yoy) for r in rows if r.yoy is not None and not math.isnan(r.yoy)]
    cut = month_of(model_cutoff) if model_cutoff else None
    return {
        "yoy_avg": mean([v for _, v in values]),
        "yoy_pre": mean([v for m, v in values if m < cut]) if cut else None,
        "yoy_post": mean([v for m, v in values if m >= cut]) if cut else None,
    }
