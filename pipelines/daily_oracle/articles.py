"""Step 1: each pending day's articles, pre-filtered, then picked (``udfs.daily_oracle.selection``).

Only the pending days' partitions of ``corpus/articles`` are read, one day at a time, and every
row of them (and every picked article) is asserted to be published on its day: the model never
sees another day.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from typing import Any

from pipelines.builders import Build
from pipelines.daily_oracle.config import Config
from pipelines.daily_oracle.state import State
from pipelines.llm.ledger import Ledger
from udfs import storage
from udfs.daily_oracle.selection import check_same_day, prefilter, select_day
from udfs.daily_oracle.units import Article
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.daily_oracle")


def corpus_days(root: str) -> list[dt.date]:
    """Every publication day in the corpus, from its partition names: no row is read (undated
    articles have no day)."""
    return sorted(storage.partition_values(ARTICLES.dataset(root), "published_date"))


def select(b: Build[Config], s: State) -> None:
    """Pre-filter and pick the articles of every pending day (``select_articles``), counted in
    the ``prefilter`` and ``select`` steps (``count_selection``)."""
    s.articles, s.prefiltered = select_articles(b.config, s.pending)
    count_selection(b.ledger, s.articles, s.prefiltered)


def select_articles(
    config: Config, days: list[dt.date]
) -> tuple[list[Article], dict[dt.date, dict[str, Any]]]:
    """Pre-filter and pick every day of ``days``, reading one day's partition at a time (memory
    holds one day's articles and the picks so far, never the corpus); returns the picked articles
    and each day's pre-filter counts (``articles``, ``eligible``, ``dropped_by_reason``)."""
    picked: list[Article] = []
    prefiltered: dict[dt.date, dict[str, Any]] = {}
    for day in days:
        rows = ARTICLES.read_partition(config.root, day).to_pylist()
        check_same_day([r for r in rows if r.get("published_at") is not None], day)
        kept, dropped = prefilter(rows, config.publishers)
        prefiltered[day] = {
            "articles": len(rows),
            "eligible": len(kept),
            "dropped_by_reason": dict(Counter(reason for _, reason in dropped)),
        }
        by_id = {r["article_id"]: r for r in kept}
        choice = select_day(
            day,
            [r["article_id"] for r in kept],
            [r["text"] for r in kept],
            config.seed,
            config.n_random,
            config.n_hot,
            config.exclude_diagonal,
        )
        day_picks = [Article(by_id[p.article_id], day, p, len(kept)) for p in choice.picks]
        check_same_day([a.row for a in day_picks], day)
        picked += day_picks
        log.info(
            "%s: %d articles, %d after pre-filters, %d clusters (%d coherent), %d picked",
            day,
            len(rows),
            len(kept),
            len(choice.clusters),
            sum(c.coherent for c in choice.clusters),
            len(day_picks),
        )
    return picked, prefiltered


def count_selection(
    ledger: Ledger, articles: list[Article], prefiltered: dict[dt.date, dict[str, Any]]
) -> None:
    """The ``prefilter`` step (articles → eligible + dropped by reason) and the ``select`` step
    (eligible → picked + ``not_sampled``)."""
    pre, sel = ledger.step("prefilter"), ledger.step("select")
    for day, counts in prefiltered.items():
        pre.rows_read += counts["articles"]
        pre.rows_written += counts["eligible"]
        for reason, n in counts["dropped_by_reason"].items():
            pre.reject(reason, n)
        picks = sum(a.day == day for a in articles)
        sel.rows_read += counts["eligible"]
        sel.rows_written += picks
        sel.reject("not_sampled", counts["eligible"] - picks)
    ledger.close(pre)
    ledger.close(sel)
