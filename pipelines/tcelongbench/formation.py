"""S1 — temporal complex events, window by window: pre-clean each day's articles as they are read,
cluster each window of days on the embeddings the article index holds, split the clusters that
span more than ``--max-span-days`` (months of one story's coverage; ``tce.split_long_clusters``),
keep the TCEs that start in the window's own days, apply the demo limits (``--limit`` TCEs,
``--max-articles-per-day``). The step's metrics are the formation report: windows, clusters
found and split, TCEs, their spans and sizes; the dataset card repeats them with the rejects.

Memory holds one window's candidates, never the corpus, and the driver never reads a day: each
window is one Ray task that reads its new days' partitions once (the columns pre-cleaning needs),
pre-cleans them with the Precleaner the previous window handed back (its URL hashes carry over),
reads the candidates' vectors from the index and clusters them. The driver gets the candidates' ids
and dates, one label each and the rejected ids back; only the clustered candidates become Python
rows, the noise, nearly every article, is recorded from Arrow. The TCEs' articles are read again at
the end, from their days' partitions only. Windows overlap by ``--max-span-days`` + 1 days, so a
TCE that starts in a window's own days ends inside it; the articles such a TCE takes are left out
of the next window, the others of the overlap are clustered again there.

Every candidate article that does not end in a TCE is a rejected row with its reason. Articles
outside the formation's scope, undated ones (``no_date``) and those outside the topic/host filter
(``topic_filter``), are counted in the step, not listed: on a real corpus they are nearly all of it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from pipelines.index.engine import ArticleIndex, require_index
from pipelines.llm.ledger import Ledger
from pipelines.llm.ray_env import ensure_ray
from pipelines.tcelongbench.config import Config
from udfs import storage
from udfs.cli import InputError
from udfs.report import progress
from udfs.schemas import ARTICLES
from udfs.tcelongbench import tce
from udfs.text import first_words

COLUMNS = [
    "article_id",
    "canonical_url",
    "host",
    "title",
    "text",
    "language",
    "published_at",
    "near_duplicate_of",
]
NOT_LISTED = ("no_date", "topic_filter")
log = logging.getLogger("augury.tcelongbench")
CANDIDATES = pa.schema([pa.field("article_id", pa.string()), pa.field("date", pa.date32())])


@dataclass
class Events:
    """The TCEs of a run, their ``tce_article`` rows and the articles those rows name."""

    tces: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    articles: dict[str, dict[str, Any]]
    max_words: int
    report: dict[str, Any] = field(default_factory=dict)  # the formation report (dataset card)
    by_id: dict[str, dict[str, Any]] = field(init=False)
    members: dict[tuple[str, int], list[str]] = field(init=False)  # (tce_id, k) -> article ids

    def __post_init__(self) -> None:
        self.by_id = {t["tce_id"]: t for t in self.tces}
        self.members = defaultdict(list)
        for row in self.rows:
            self.members[(row["tce_id"], row["k"])].append(row["article_id"])

    def text(self, article_id: str) -> str:
        """An article's text as every prompt shows it: its first ``max_words`` words."""
        return first_words(self.articles[article_id]["text"], self.max_words)


def form_tces(config: Config, ledger: Ledger) -> Events:
    """The TCEs of the articles under the root, with one rejected row per candidate left out."""
    step = ledger.step("tce_formation")
    dataset = ARTICLES.dataset(config.root)  # partitions and counts; days are read on their own
    days = sorted(storage.partition_values(dataset, "published_date"))
    topic = tce.TopicFilter(config.topic_keywords, config.topic_hosts)
    cleaner = tce.Precleaner(topic, config.min_chars, config.languages)
    unlisted: dict[str, int] = defaultdict(int)
    unlisted["no_date"] += dataset.count_rows(filter=pc.field("published_date").is_null())
    if days:
        require_index(config.root)
        ensure_ray(config.llm)
    work = ray.remote(_window_work)
    windows = tce.windows(days, config.window_days, config.max_span_days + 1)
    carried = CANDIDATES.empty_table()  # the overlap's candidates, not yet decided
    read_to = days[0] if days else None
    remaining = config.limit
    tces: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    clusters = split = 0
    for window in progress(windows, "tce_formation: windows clustered", log):
        new_days = [d for d in days if read_to <= d < window.end]
        read_to = window.end
        done: WindowWork = ray.get(work.remote(config, window, new_days, cleaner, carried))
        cleaner, candidates, labels = done.cleaner, done.candidates, done.labels
        clusters, split = clusters + done.clusters, split + done.split
        for reason, ids in done.rejects.items():
            ledger.drop_ids(step, reason, unit="article", ids=ids)
        for reason, n in done.unlisted.items():
            unlisted[reason] += n
        clustered = labels != tce.NOISE
        noise = candidates.filter(pa.array(~clustered))
        own_noise = noise.filter(pc.less(noise["date"], pa.scalar(window.own_end, pa.date32())))
        ledger.drop_ids(step, "cluster_noise", unit="article", ids=own_noise["article_id"])
        found, found_rows, rejects = tce.form_tces(
            candidates.filter(pa.array(clustered)).to_pylist(),
            labels[clustered],
            topic.key,
            config.min_span_days,
            config.max_span_days,
        )
        own = {t["tce_id"] for t in found if t["start_date"] < window.own_end}
        own_rows = [r for r in found_rows if r["tce_id"] in own]
        for article, reason in rejects:
            if article["date"] < window.own_end:  # the rest of the overlap goes to the next window
                ledger.drop(step, reason, unit="article", item_id=article["article_id"])
        kept, kept_rows, limited = tce.limit_tces(
            [t for t in found if t["tce_id"] in own], own_rows, remaining, config.max_articles_per_day
        )
        for row, reason in limited:
            ledger.drop(step, reason, unit="article", item_id=row["article_id"], parent_id=row["tce_id"])
        ledger.keep(step, len(kept_rows))
        tces += kept
        rows += kept_rows
        remaining = None if remaining is None else remaining - len(kept)
        taken = pa.array(sorted({r["article_id"] for r in own_rows}), pa.string())
        overlap = candidates.filter(
            pc.greater_equal(candidates["date"], pa.scalar(window.own_end, pa.date32()))
        )
        carried = overlap.filter(pc.invert(pc.is_in(overlap["article_id"], value_set=taken)))
    for reason, n in unlisted.items():
        step.rows_read += n
        step.reject(reason, n)
    total = storage.count_rows(ARTICLES.uri(config.root))
    if step.rows_read != total:
        raise AssertionError(f"tce_formation: {total} articles read, {step.rows_read} accounted for")
    # clusters of the overlap are counted in each window that clustered them
    step.metrics.update(windows=len(windows), clusters=clusters, clusters_split=split)
    step.metrics.update(report(tces))
    step.notes.append("no_date and topic_filter articles are counted, not listed in rejected")
    ledger.close(step)
    card = {**step.metrics, "rejected_by_reason": {r: n for r, n in sorted(step.rejected.items()) if n}}
    return Events(tces, rows, _tce_articles(config.root, rows), config.max_article_words, card)


def report(tces: list[dict[str, Any]]) -> dict[str, Any]:
    """The kept TCEs' spans and sizes (min, median, max): with the step's clusters, splits and
    rejects by reason, the formation report of the run summary and the dataset card."""

    def spread(values: list[int]) -> str:
        return f"{min(values)} / {int(np.median(values))} / {max(values)}" if values else "-"

    return {
        "tces": len(tces),
        "span_days (min / median / max)": spread([t["span_days"] for t in tces]),
        "articles_per_tce (min / median / max)": spread([t["n_articles"] for t in tces]),
    }


def _tce_articles(root: str, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The TCEs' articles in full (with their ``date``), read from their days' partitions only."""
    date_of = {r["article_id"]: r["date"] for r in rows}
    if not date_of:
        return {}
    found = ArticleIndex(root).articles(date_of, COLUMNS).to_pylist()
    return {a["article_id"]: {**a, "date": date_of[a["article_id"]]} for a in found}


@dataclass
class WindowWork:
    """What a window's task hands back: the pre-cleaner (its URL state carries to the next
    window), the window's candidates (``CANDIDATES``, by ``article_id``) and their labels (the
    over-long clusters split), the clusters HDBSCAN found and how many were split, the ids
    pre-cleaning rejected by reason and the counts of the reasons that are not listed."""

    cleaner: tce.Precleaner
    candidates: pa.Table
    labels: np.ndarray
    clusters: int
    split: int
    rejects: dict[str, pa.Array]
    unlisted: dict[str, int]


def _window_work(
    config: Config, window: tce.Window, days: list[dt.date], cleaner: tce.Precleaner, carried: pa.Table
) -> WindowWork:
    """Pre-clean the window's new ``days`` and cluster them with the ``carried`` overlap, in a Ray
    worker: the days' text, the window's vectors and the clustering's working memory all grow with
    the articles a day holds; the driver gets ids, dates and one label per candidate back."""
    new, listed, unlisted = [carried], defaultdict(list), defaultdict(int)
    for day in days:
        kept, rejects = cleaner.day(ARTICLES.read_partition(config.root, day, COLUMNS).to_pylist())
        for article, reason in rejects:
            if reason in NOT_LISTED:
                unlisted[reason] += 1
            else:
                listed[reason].append(article["article_id"])
        ids_dates = [{"article_id": a["article_id"], "date": a["date"]} for a in kept]
        new.append(pa.Table.from_pylist(ids_dates, CANDIDATES))
    candidates = pa.concat_tables(new).sort_by("article_id")
    vectors = _vectors(ArticleIndex(config.root), window, candidates["article_id"].to_pylist())
    dates = candidates["date"].to_pylist()
    features = tce.cluster_features(vectors, dates, config.time_weight, config.time_scale_days)
    found = tce.cluster_labels(features, config.min_cluster_size, config.min_samples)
    del features  # a second copy of the vectors; splitting clusters the vectors alone
    labels, split = tce.split_long_clusters(
        found, vectors, dates, config.max_span_days, config.min_cluster_size, config.min_samples
    )
    clusters = len(np.unique(found[found != tce.NOISE]))
    rejected = {reason: pa.array(ids, pa.string()) for reason, ids in listed.items()}
    return WindowWork(cleaner, candidates, labels, clusters, split, rejected, dict(unlisted))


def _vectors(index: ArticleIndex, window: tce.Window, ids: list[str]) -> np.ndarray:
    """The index's embeddings of the articles ``ids`` (all published in ``window``), in their order."""
    if not ids:
        return np.zeros((0, 1), dtype=np.float32)
    table = index.vectors(ids, window.start, window.end)
    where = {a: i for i, a in enumerate(table.column("article_id").to_pylist())}
    missing = [a for a in ids if a not in where]
    if missing:
        raise InputError(
            f"the article index at {index.root} is out of date: {len(missing)} articles of "
            f"{window.start}..{window.end} are not in it (first: {missing[0]}); "
            f"run python -m pipelines.index --root {index.root}"
        )
    vectors = table.column("vector").combine_chunks()
    matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(len(vectors), -1)
    return matrix[[where[a] for a in ids]]
