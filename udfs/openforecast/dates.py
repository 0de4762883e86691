"""Dates as OpenForecast uses them: ``yyyy``, ``yyyy-MM`` or ``yyyy-MM-dd`` strings from model
answers, and the half-open day interval each one covers.

Model answers are parsed by regex with the paper's preference: a full date first, then a
year-month, then a year. A partial date stands for its whole period: ``2023-08`` covers
2023-08-01 up to (not including) 2023-09-01, so a cut can be checked against it safely.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

_FULL = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_MONTH = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})(?![\d-])")
_YEAR = re.compile(r"(?<![\d-])(\d{4})(?![\d])")
MIN_YEAR, MAX_YEAR = 1000, 2999


@dataclass(frozen=True)
class Period:
    """The days a date string covers: ``start`` inclusive, ``end`` exclusive."""

    start: dt.date
    end: dt.date

    @property
    def last_day(self) -> dt.date:
        return self.end - dt.timedelta(days=1)


def _valid(year: int, month: int = 1, day: int = 1) -> bool:
    if not MIN_YEAR <= year <= MAX_YEAR:
        return False
    try:
        dt.date(year, month, day)
    except ValueError:
        return False
    return True


def extract_date(text: str | None) -> str | None:
    """The date in a model answer, normalised to ``yyyy``, ``yyyy-MM`` or ``yyyy-MM-dd``.

    Prefers a valid full date anywhere in the text, then a valid year-month, then a year;
    ``None`` when there is none (``Unknown``, empty or garbled answers).
    """
    text = text or ""
    for m in _FULL.finditer(text):
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if _valid(y, mo, d):
            return f"{y:04d}-{mo:02d}-{d:02d}"
    for m in _MONTH.finditer(text):
        y, mo = int(m.group(1)), int(m.group(2))
        if _valid(y, mo):
            return f"{y:04d}-{mo:02d}"
    for m in _FULL.finditer(text):  # an invalid full date still names its year (and maybe month)
        y, mo = int(m.group(1)), int(m.group(2))
        if _valid(y, mo):
            return f"{y:04d}-{mo:02d}"
        if _valid(y):
            return f"{y:04d}"
    for m in _YEAR.finditer(text):
        if _valid(int(m.group(1))):
            return m.group(1)
    return None


def period(value: str | None) -> Period | None:
    """The period a normalised date string covers, or None for None."""
    if not value:
        return None
    parts = [int(p) for p in value.split("-")]
    if len(parts) == 3:
        start = dt.date(*parts)
        return Period(start, start + dt.timedelta(days=1))
    if len(parts) == 2:
        year, month = parts
        start = dt.date(year, month, 1)
        end = dt.date(year + 1, 1, 1) if month == 12 else dt.date(year, month + 1, 1)
        return Period(start, end)
    if len(parts) == 1:
        return Period(dt.date(parts[0], 1, 1), dt.date(parts[0] + 1, 1, 1))
    raise ValueError(f"not a yyyy[-MM[-dd]] date: {value!r}")


def is_full_date(value: str | None) -> bool:
    return bool(value) and value.count("-") == 2


def add_months(day: dt.date, months: int) -> dt.date:
    """The same day of the month ``months`` later (or earlier), clamped to the month's end."""
    year, month0 = divmod(day.year * 12 + day.month - 1 + months, 12)
    return dt.date(year, month0 + 1, min(day.day, calendar.monthrange(year, month0 + 1)[1]))
