"""The leak check every hit passes: strictly before the cutoff; a date means its midnight UTC."""

import datetime as dt

import pytest

from udfs.retrieval import Hit, LeakageError, check_hits

START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_a_hit_at_or_after_the_cutoff_fails_the_run():
    check_hits([Hit("x", START - dt.timedelta(microseconds=1), 1.0, 1)], START)
    for late in (START, START + dt.timedelta(days=2)):
        with pytest.raises(LeakageError, match="1 retrieved documents"):
            check_hits([Hit("x", late, 1.0, 1)], START)


def test_dates_mean_midnight_utc_and_naive_times_are_utc():
    with pytest.raises(LeakageError):
        check_hits([Hit("a", START.replace(tzinfo=None), 1.0, 1)], START.date())
    check_hits([Hit("a", START - dt.timedelta(seconds=1), 1.0, 1)], START.date())
    east = dt.timezone(dt.timedelta(hours=2))
    with pytest.raises(LeakageError):  # 01:00 at +02:00 is 23:00 UTC the day before: not before it
        check_hits([Hit("a", START - dt.timedelta(hours=1), 1.0, 1)], dt.datetime(2024, 1, 1, 1, tzinfo=east))
