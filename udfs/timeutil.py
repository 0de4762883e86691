"""Time conventions shared by every builder: instants are aware UTC datetimes; a bare date means
00:00 UTC of that day (as a cutoff) and a naive datetime is read as UTC."""

from __future__ import annotations

import datetime as dt


def to_utc(value: dt.datetime | dt.date) -> dt.datetime:
    """An aware UTC datetime for a datetime (naive → UTC) or a date (→ its 00:00 UTC)."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
