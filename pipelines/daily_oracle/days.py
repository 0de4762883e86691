"""Days as the unit of work: which requested days are pending, and their completion markers.

A day is marked done under ``daily_oracle/days/date=D/`` (with its counts) once its tables are
written, except a day without any article in the corpus (ingesting it later builds it) or with an
engine error (the next run retries it). A marked day is skipped unless ``--force`` asks for it.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from pipelines.builders import Build
from pipelines.daily_oracle.articles import corpus_days
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.state import State
from pipelines.llm.ledger import Ledger
from udfs import storage
from udfs.daily_oracle.rows import day_counts
from udfs.daily_oracle.units import Article, Question
from udfs.layout import Layout

log = logging.getLogger("augury.daily_oracle")


def day_uri(root: str, day: dt.date) -> str:
    """Where a day's completion marker lives."""
    return Layout(root).stage(NAME, "days", f"date={day.isoformat()}")


@dataclass(frozen=True)
class Days:
    """The requested days of a run: ``pending`` to build now, ``skipped`` (built already) and
    ``deferred`` (pending beyond ``--limit``, left for the next run)."""

    pending: list[dt.date]
    skipped: list[dt.date]
    deferred: list[dt.date]


def pending_days(b: Build[Config], s: State) -> None:
    """The run's days (``requested_days``); with none pending, the run has nothing to build."""
    days = requested_days(b.config)
    s.pending, s.skipped = days.pending, days.skipped
    if not s.pending:
        b.stop(f"nothing to build ({len(s.skipped)} requested days already built)")


def requested_days(config: Config) -> Days:
    """The days to build: the requested ones (or every corpus day at least ``settle_days`` old),
    without the marked ones unless forced, at most ``limit`` of them, oldest first."""
    if config.days:
        days = list(config.days)
    else:
        latest = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=config.settle_days)
        days = [d for d in corpus_days(config.root) if d <= latest]
    pending = [d for d in days if config.force or not storage.is_done(day_uri(config.root, d))]
    skipped = [d for d in days if d not in pending]
    if skipped:
        log.info("skipping %d built days: %s", len(skipped), ", ".join(map(str, skipped)))
    deferred = pending[config.limit :] if config.limit is not None else []
    if deferred:
        log.info(
            "--limit %d: %d pending days left for the next run, from %s",
            config.limit,
            len(deferred),
            deferred[0],
        )
    return Days(pending[: len(pending) - len(deferred)], skipped, deferred)


def clear_marks(root: str, days: list[dt.date]) -> None:
    """Remove the markers of days about to be rebuilt (forced ones)."""
    for day in days:
        storage.delete(day_uri(root, day))


def unmarked_days(
    days: list[dt.date],
    articles: list[Article],
    questions: list[Question],
    prefiltered: dict[dt.date, dict[str, Any]],
) -> dict[dt.date, str]:
    """The built days not to mark done, with the reason: a day without any article in the corpus
    or with an engine error (the next run builds it again)."""
    unmarked: dict[dt.date, str] = {}
    for day in days:
        counts = day_counts(day, articles, questions, prefiltered[day])
        if not prefiltered[day]["articles"]:
            unmarked[day] = "no_articles"
            log.warning("%s: no articles; not marked", day)
        elif counts["engine_errors"]:
            unmarked[day] = "engine_error"
            log.warning(
                "%s: %d units ended with an engine error; tables written, not marked (the next run rebuilds it)",
                day,
                counts["engine_errors"],
            )
    return unmarked


def mark_days(
    root: str,
    days: list[dt.date],
    unmarked: dict[dt.date, str],
    articles: list[Article],
    questions: list[Question],
    prefiltered: dict[dt.date, dict[str, Any]],
) -> None:
    """Mark each built day done, with its counts, except the ``unmarked`` ones."""
    for day in days:
        if day not in unmarked:
            storage.mark_done(day_uri(root, day), day_counts(day, articles, questions, prefiltered[day]))


def count_days(ledger: Ledger, days: list[dt.date], unmarked: dict[dt.date, str]) -> None:
    """The ``days`` step: pending days = marked + not marked, by reason."""
    summary = ledger.step("days")
    summary.rows_read = len(days)
    summary.rows_written = len(days) - len(unmarked)
    for reason in unmarked.values():
        summary.reject(reason)
    ledger.close(summary)


def day_markers(root: str) -> dict[str, dict[str, Any]]:
    """The counts of every day marked done, by ISO date."""
    per_day = {}
    for marker in storage.list_files(Layout(root).stage(NAME, "days"), storage.MARKER):
        counts = storage.read_json(marker)
        per_day[counts["date"]] = {k: v for k, v in counts.items() if k != "date"}
    return per_day
