"""Splits by complex-event date, and the cut time of every question.

**Splits.** A CE's date (for a span, its end) resolves to the *last* day of its period, so a
CE dated ``2023`` counts as 2023-12-31 (the leakage-safe choice). ``train`` ends on ``train_end``,
``dev`` on ``dev_end``, ``test`` on ``test_end``; later CEs are dropped. ``from_test_start``
applies the spec's rule for newer corpora (a 2-month dev and a 7-month test window around the day
after the evaluated models' latest knowledge cutoff).

**Cut time.** ``t_cut`` is a UTC midnight. A cut at index ``k`` shows the background
``e[0:k]``; ``t_cut`` is the later of (a) the end of the last dated background event and (b) the
first day of ``e[k]`` when ``e[k]`` is dated. So every dated background event lies entirely before
``t_cut``, and no question is asked after the day its next event starts. A cut is refused when
neither exists (``undated_cut``), when a dated event at or after ``k`` ends by ``t_cut``
(``not_chronological``) or, for dev and test, when ``t_cut`` falls before the split's first
day (``before_split_start``): a dev or test question is never about something that happened
in an earlier split's window.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from udfs.openforecast.dates import Period, add_months

SPLITS = ("train", "dev", "test")


class TemporalLeakError(AssertionError):
    """Information at or after a cut reached what a generator or forecaster sees, or a split
    holds a CE or question outside its window."""


class NoCutError(ValueError):
    """No valid cut time at this index; the message is the reason code."""


@dataclass(frozen=True)
class SplitCutoffs:
    """Inclusive last days of the three splits."""

    train_end: dt.date
    dev_end: dt.date
    test_end: dt.date

    def __post_init__(self) -> None:
        if not self.train_end < self.dev_end < self.test_end:
            raise ValueError("split cutoffs must satisfy train_end < dev_end < test_end")

    @classmethod
    def from_test_start(cls, test_start: dt.date) -> SplitCutoffs:
        """dev = [test_start − 2 months, test_start); test = [test_start, test_start + 7 months)."""
        dev_start = add_months(test_start, -2)
        return cls(
            train_end=dev_start - dt.timedelta(days=1),
            dev_end=test_start - dt.timedelta(days=1),
            test_end=add_months(test_start, 7) - dt.timedelta(days=1),
        )

    def start(self, split: str) -> dt.date | None:
        """The first day of a split's window (None for train, which has no lower bound)."""
        return {
            "train": None,
            "dev": self.train_end + dt.timedelta(days=1),
            "test": self.dev_end + dt.timedelta(days=1),
        }[split]

    def end(self, split: str) -> dt.date:
        return {"train": self.train_end, "dev": self.dev_end, "test": self.test_end}[split]

    def assign(self, ce_date: Period) -> str | None:
        """The split of a CE dated ``ce_date`` (by its last day), or None after ``test_end``."""
        day = ce_date.last_day
        for split in SPLITS:
            if day <= self.end(split):
                return split
        return None

    def check_ce(self, split: str, ce_date: Period) -> None:
        """Raise TemporalLeakError when a CE's date is outside its split's window."""
        day, start = ce_date.last_day, self.start(split)
        if day > self.end(split) or (start is not None and day < start):
            raise TemporalLeakError(f"CE dated {day} does not belong to {split}")


PAPER_CUTOFFS = SplitCutoffs(dt.date(2023, 6, 30), dt.date(2023, 8, 31), dt.date(2024, 3, 31))


def cut_time(periods: Sequence[Period | None], k: int, split_start: dt.date | None = None) -> dt.date:
    """The cut day of a cut before ``e[k]`` (see the module docstring); raises NoCutError."""
    if not 0 < k < len(periods):
        raise NoCutError("cut_out_of_range")
    background = [p.end for p in periods[:k] if p is not None]
    candidates = [max(background)] if background else []
    if periods[k] is not None:
        candidates.append(periods[k].start)
    if not candidates:
        raise NoCutError("undated_cut")
    t_cut = max(candidates)
    if any(p is not None and p.end <= t_cut for p in periods[k:]):
        raise NoCutError("not_chronological")
    if split_start is not None and t_cut < split_start:
        raise NoCutError("before_split_start")
    return t_cut


def assert_before_cut(periods: Sequence[Period | None], t_cut: dt.date, what: str) -> None:
    """Everything shown as background must lie entirely before the cut."""
    for i, p in enumerate(periods):
        if p is not None and p.end > t_cut:
            raise TemporalLeakError(
                f"{what}: background event {i} ({p.start}..{p.last_day}) is not before {t_cut}"
            )


def assert_not_before_cut(periods: Sequence[Period | None], t_cut: dt.date, what: str) -> None:
    """A target (gold) event must not lie entirely before the cut."""
    for i, p in enumerate(periods):
        if p is not None and p.end <= t_cut:
            raise TemporalLeakError(f"{what}: target event {i} ({p.start}..{p.last_day}) ends before {t_cut}")
