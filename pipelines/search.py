"""Search the article index as a forecaster would, with a cutoff.

    python -m pipelines.search --root ROOT --cutoff 2022-09-16 [--mode hybrid] [--k 10] "storm in Houston"

Prints the top hits (publication time, host, title, score): every hit was published strictly
before the cutoff (a date is its midnight UTC).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pipelines.index.engine import MODES, ArticleIndex, IndexHit, has_index
from udfs.cli import InputError, check_options, option, run_cli
from udfs.layout import Layout


@dataclass(frozen=True)
class Config:
    """One search."""

    root: str = option(help="root URI whose index/articles was built by python -m pipelines.index")
    query: str = option(positional=True, help="the query text")
    cutoff: dt.datetime = option(help="only articles published strictly before this date or time (UTC)")
    mode: str = option(
        "hybrid",
        choices=MODES,
        help="bm25, dense, hybrid (reciprocal rank fusion), bm25_title (a title match counts 1.25x) or tfidf",
    )
    k: int = option(10, min=1, help="hits to print")

    def __post_init__(self) -> None:
        check_options(self)


def run(config: Config) -> list[IndexHit]:
    Layout(config.root).check_root()
    if not has_index(config.root):
        raise InputError(f"no index under {config.root}: run python -m pipelines.index --root {config.root}")
    hits = ArticleIndex(config.root).search(config.query, config.cutoff, config.k, config.mode)
    print(f"{len(hits)} hits before {config.cutoff.isoformat()} ({config.mode}):")
    for h in hits:
        when = h.published_at.strftime("%Y-%m-%d %H:%M")
        print(f"{h.rank:>3}  {when}  {h.score:8.4f}  {(h.host or '-'):<28.28}  {h.title or ''}")
    return hits


def main(argv: list[str] | None = None) -> None:
    run_cli(Config, run, "python -m pipelines.search", __doc__.split("\n\n")[0], argv)


if __name__ == "__main__":
    main()
