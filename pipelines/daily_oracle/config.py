"""Options of the Daily Oracle builder: which days, which publishers, how many articles a day.

The shared options (``pipelines.options.BuildOptions``): ``--limit N`` builds at most N pending days
(oldest first; the rest wait for the next run), ``--force`` rebuilds the requested days and sends
their LLM requests again, ``--plan`` prints what a run would send, ``--seed`` seeds every draw and
the MC option order, ``--max-new-tokens`` (LLM group) caps every generated answer.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pipelines.options import BuildOptions
from udfs.cli import option
from udfs.daily_oracle.selection import DEFAULT_PUBLISHERS
from udfs.daily_oracle.units import NAME

__all__ = ["NAME", "Config"]


@dataclass(frozen=True)
class Config(BuildOptions):
    """What to build and how. No day given: every corpus day at least ``settle_days`` old (late
    CC-NEWS captures of a day arrive for a few days; spec §8.2)."""

    dates: tuple[dt.date, ...] = option(
        (),
        help="a publication day to build questions from (repeatable; a built day is skipped unless --force)",
        flag="--date",
        repeat=True,
    )
    start: dt.date | None = option(None, help="first day of a range to build (with --to)", flag="--from")
    end: dt.date | None = option(None, help="last day of the range, inclusive (with --from)", flag="--to")
    publishers: tuple[str, ...] = option(
        DEFAULT_PUBLISHERS,
        help="keep only the articles of these hosts, comma-separated (subdomains match)",
        metavar="HOST[,...]",
    )
    n_random: int = option(3, help="articles picked at random per day", flag="--random", min=0)
    n_hot: int = option(
        3, help="articles picked per day from its coherent topic clusters (hot topics)", flag="--hot", min=0
    )
    article_words: int | None = option(
        None, help="cut the article shown to the model after N words [default: the whole text]", min=1
    )
    exclude_diagonal: bool = option(
        False,
        help="hot topics: leave a cluster's zero self-distances out of its mean pairwise distance (spec §8.5)",
    )
    settle_days: int = option(
        3,
        help="without --date/--from: build every corpus day at least N days old (late captures of a day "
        "keep arriving for a few days)",
        min=0,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.start is None) != (self.end is None):
            raise ValueError("--from and --to go together")
        if self.start is not None and self.end < self.start:
            raise ValueError(f"--to {self.end} is before --from {self.start}")

    @property
    def days(self) -> tuple[dt.date, ...]:
        """The requested days, sorted: every ``--date`` and every day of ``--from``..``--to``."""
        days = set(self.dates)
        if self.start is not None:
            days |= {self.start + dt.timedelta(days=k) for k in range((self.end - self.start).days + 1)}
        return tuple(sorted(days))
