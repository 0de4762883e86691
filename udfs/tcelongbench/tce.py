"""S1 — temporal complex events (TCEs) from the articles table.

Articles are pre-cleaned (dated, long enough, in an allowed language, inside the topic/host
filter, no URL or same-title-same-day duplicates), embedded (title + the first words of the
text), given one scaled time feature and clustered with HDBSCAN. A cluster that spans more days
than a TCE may is split, by topic and then in time (``split_long_clusters``). A cluster or part
becomes a TCE when its calendar span lies within the configured bounds and it has at least two
distinct dates. Every article that does not end up in a TCE gets exactly one reason.
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from udfs.ids import stable_id
from udfs.text import headline
from udfs.urls import host_matches

NOISE = -1
EMBED_WORDS = 200


@dataclass(frozen=True)
class TopicFilter:
    """Which articles one partition holds: any keyword (case-insensitive, in title or text) and/or
    a host allow-list; empty means no restriction."""

    keywords: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The partition key that enters every ``tce_id``."""
        if not self.keywords and not self.hosts:
            return "all"
        return (
            "kw="
            + "|".join(sorted(k.casefold() for k in self.keywords))
            + ";hosts="
            + "|".join(sorted(self.hosts))
        )

    def admits(self, article: dict[str, Any]) -> bool:
        if self.hosts and not host_matches(article.get("host"), frozenset(self.hosts)):
            return False
        if self.keywords:
            text = f"{article.get('title') or ''}\n{article.get('text') or ''}".casefold()
            return any(k.casefold() in text for k in self.keywords)
        return True


def normalize_title(title: str | None) -> str:
    """Casefolded title without punctuation and repeated whitespace (same-day duplicate key)."""
    return " ".join(re.sub(r"[^\w\s]", " ", (title or "").casefold()).split())


class Precleaner:
    """Pre-cleaning, one publication day at a time in day order: a day's articles split into the
    ones to cluster (with a ``date`` field) and ``(article, reason)`` rejects. The first article in
    ``(published_at, article_id)`` order wins among duplicates: a canonical URL seen on any earlier
    day or earlier the same day, a title seen on the same day. The earlier days' URLs are one
    sorted array of 64-bit hashes: 8 bytes a kept article, where a set of Python ints took ~70."""

    def __init__(self, topic: TopicFilter, min_chars: int, languages: Sequence[str]):
        self.topic, self.min_chars, self.languages = topic, min_chars, languages
        self.seen_urls = np.zeros(0, dtype=np.int64)  # sorted

    def day(
        self, articles: Iterable[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
        ordered = sorted(
            articles,
            key=lambda a: (a.get("published_at") is None, a.get("published_at") or 0, a["article_id"]),
        )
        kept, rejected = [], []
        seen_titles: set[tuple[dt.date, str]] = set()
        today: set[int] = set()
        for a in ordered:
            if a.get("published_at") is None:
                rejected.append((a, "no_date"))
                continue
            date = a["published_at"].astimezone(dt.UTC).date()
            title_key = (date, normalize_title(a.get("title")))
            url = url_hash(a["canonical_url"])
            if a.get("near_duplicate_of"):
                reason = "near_duplicate"
            elif len(a.get("text") or "") < self.min_chars:
                reason = "too_short"
            elif self.languages and a.get("language") not in self.languages:
                reason = "language"
            elif not self.topic.admits(a):
                reason = "topic_filter"
            elif url in today or self._seen_before(url):
                reason = "duplicate_url"
            elif title_key[1] and title_key in seen_titles:
                reason = "duplicate_title"
            else:
                today.add(url)
                seen_titles.add(title_key)
                kept.append({**a, "date": date})
                continue
            rejected.append((a, reason))
        new = np.sort(np.fromiter(today, np.int64, len(today)))  # disjoint from seen_urls
        self.seen_urls = np.insert(self.seen_urls, np.searchsorted(self.seen_urls, new), new)
        return kept, rejected

    def _seen_before(self, url: int) -> bool:
        at = int(np.searchsorted(self.seen_urls, url))
        return at < len(self.seen_urls) and int(self.seen_urls[at]) == url


def url_hash(url: str | None) -> int:
    """A URL's 64-bit ``stable_id`` as an int64, the same in every process: the Precleaner travels
    from one window's Ray worker to the next, where Python's own ``hash`` of a string is salted
    differently."""
    return int.from_bytes(bytes.fromhex(stable_id(url or "", length=8)), "little", signed=True)


def embed_text(article: dict[str, Any], words: int = EMBED_WORDS) -> str:
    """What is embedded for clustering: the title and the first ``words`` words of the text (the
    article index's document text)."""
    return headline(article.get("title"), article.get("text"), words)


@dataclass(frozen=True)
class Window:
    """Days ``[start, end)`` clustered together; the window decides the articles of ``[start,
    own_end)`` and the TCEs that start there; the rest is the next window's overlap."""

    start: dt.date
    own_end: dt.date
    end: dt.date


def windows(days: Sequence[dt.date], window_days: int, overlap_days: int) -> list[Window]:
    """Windows of ``window_days`` over the sorted ``days``, each overlapping the next by
    ``overlap_days`` (longer than the longest TCE span, so a TCE that starts in a window's own
    days ends inside it). A stretch without days is skipped; the last window owns all it holds."""
    if window_days <= overlap_days:
        raise ValueError(f"a window of {window_days} days must be longer than its {overlap_days}-day overlap")
    out: list[Window] = []
    width, step = dt.timedelta(days=window_days), dt.timedelta(days=window_days - overlap_days)
    start = days[0] if days else None
    while start is not None:
        end = start + width
        if days[-1] < end:
            out.append(Window(start, end, end))
            break
        out.append(Window(start, start + step, end))
        following = days[bisect.bisect_left(days, start + step)]
        start = start + step if following < start + step + width else following
    return out


def cluster_features(
    vectors: np.ndarray, dates: Sequence[dt.date], time_weight: float, time_scale_days: float
) -> np.ndarray:
    """The normalised text vectors with one appended column:
    ``time_weight * (days since the earliest date) / time_scale_days``."""
    if not len(dates):
        return np.zeros((0, vectors.shape[1] + 1), dtype=np.float32)
    start = min(dates)
    days = np.array([(d - start).days for d in dates], dtype=np.float32)
    time_col = (time_weight * days / time_scale_days).reshape(-1, 1)
    return np.hstack([vectors.astype(np.float32), time_col.astype(np.float32)])


def cluster_labels(features: np.ndarray, min_cluster_size: int, min_samples: int) -> np.ndarray:
    """HDBSCAN labels (euclidean); −1 is noise. Fewer points than ``min_cluster_size`` (or than
    ``min_samples``, which HDBSCAN refuses) are all noise."""
    if features.shape[0] < max(2, min_cluster_size, min_samples):
        return np.full(features.shape[0], NOISE, dtype=np.int64)
    from sklearn.cluster import HDBSCAN

    return HDBSCAN(
        min_cluster_size=min_cluster_size, min_samples=min_samples, metric="euclidean", copy=True
    ).fit_predict(features)


GAP_DAYS = 7  # articles further apart than this, a week or more without one, end an event


def split_long_clusters(
    labels: np.ndarray,
    vectors: np.ndarray,
    dates: Sequence[dt.date],
    max_span_days: int,
    min_cluster_size: int,
    min_samples: int,
) -> tuple[np.ndarray, int]:
    """Split every cluster whose dates span more than ``max_span_days``: real coverage of a story
    runs for months and HDBSCAN chains it into one cluster. A long cluster is split by topic first
    (HDBSCAN on its members' text vectors alone, when that finds two or more topics), each part
    again while it is long; a part with one topic is cut in time, between consecutive articles
    more than ``GAP_DAYS`` days apart (seven or more days without one), then into equal
    stretches of at most ``max_span_days`` + 1 days. Returns the labels (parts get new labels
    after the existing ones; noise and short clusters keep theirs) and how many clusters were
    split."""
    labels = np.asarray(labels)
    out = labels.copy()
    day = np.array([d.toordinal() for d in dates], dtype=np.int64)
    fresh = int(labels.max()) + 1 if len(labels) else 0
    split = 0
    for label in np.unique(labels[labels != NOISE]):
        members = np.flatnonzero(labels == label)
        if np.ptp(day[members]) <= max_span_days:
            continue
        split += 1
        for part in _parts(members, vectors, day, max_span_days, min_cluster_size, min_samples):
            out[part] = fresh
            fresh += 1
    return out, split


def _parts(
    members: np.ndarray, vectors: np.ndarray, day: np.ndarray, max_span: int, min_size: int, min_samples: int
) -> list[np.ndarray]:
    """``members`` (row numbers) as parts that each span at most ``max_span`` days."""
    parts, pending = [], [members]
    while pending:
        rows = pending.pop()
        if np.ptp(day[rows]) <= max_span:
            parts.append(rows)
            continue
        topics = _topics(vectors[rows], min_size, min_samples)
        if len(topics) > 1:
            pending += [rows[t] for t in reversed(topics)]
            continue
        order = rows[np.argsort(day[rows], kind="stable")]
        for stretch in np.split(order, np.flatnonzero(np.diff(day[order]) > GAP_DAYS) + 1):
            days = day[stretch] - day[stretch[0]]
            pieces = -(-(int(days[-1]) + 1) // (max_span + 1))
            width = -(-(int(days[-1]) + 1) // pieces)  # at most max_span + 1
            bucket = days // width  # sorted
            parts += np.split(stretch, np.flatnonzero(np.diff(bucket)) + 1)
    return parts


def _topics(vectors: np.ndarray, min_size: int, min_samples: int) -> list[np.ndarray]:
    """The topics HDBSCAN finds among ``vectors`` as row-number arrays, or all rows as one topic
    unless it finds two or more that hold at least half of the rows. Stories mixed in one cluster
    come apart with (nearly) no noise; one story's coverage is mostly noise to it (measured on
    the test corpus of ``tests/pipelines/tce_stories.py`` with MiniLM: 0 noise for two stories,
    153–224 of 221–235 articles for one, with two spurious topics in the rest). A point left out
    of the topics joins the one whose centre is nearest: splitting loses no article."""
    labels = cluster_labels(vectors, min_size, min_samples)  # all noise when there are too few
    found = np.unique(labels[labels != NOISE])
    if len(found) < 2 or (labels == NOISE).mean() > 0.5:
        return [np.arange(len(vectors))]
    centres = np.stack([vectors[labels == t].mean(axis=0) for t in found])
    distance = (centres**2).sum(axis=1) - 2 * vectors @ centres.T  # squared, less the point's own norm
    nearest = found[np.argmin(distance, axis=1)]
    labels = np.where(labels == NOISE, nearest, labels)
    return [np.flatnonzero(labels == t) for t in found]


def form_tces(
    articles: Sequence[dict[str, Any]],
    labels: Sequence[int],
    partition_key: str,
    min_span_days: int,
    max_span_days: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """Clusters → ``(tces, tce_articles, rejects)``.

    A cluster is kept iff ``min_span_days ≤ (max date − min date).days ≤ max_span_days`` and it
    has ≥ 2 distinct dates (formation splits over-long clusters first, ``split_long_clusters``,
    so none of its parts is too long). ``k`` numbers the distinct dates 1..n.
    ``tce_id`` hashes the partition key and the sorted article ids.
    """
    members: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rejects: list[tuple[dict[str, Any], str]] = []
    for article, label in zip(articles, labels, strict=True):
        if int(label) == NOISE:
            rejects.append((article, "cluster_noise"))
        else:
            members[int(label)].append(article)
    tces, tce_articles = [], []
    for label in sorted(members):
        group = members[label]
        dates = sorted({a["date"] for a in group})
        span = (dates[-1] - dates[0]).days
        if len(dates) < 2:
            rejects += [(a, "tce_single_date") for a in group]
            continue
        if span < min_span_days:
            rejects += [(a, "tce_span_too_short") for a in group]
            continue
        if span > max_span_days:
            rejects += [(a, "tce_span_too_long") for a in group]
            continue
        ids = sorted(a["article_id"] for a in group)
        tce_id = stable_id("tce", partition_key, *ids)
        k_of = {d: k for k, d in enumerate(dates, start=1)}
        tces.append(
            {
                "tce_id": tce_id,
                "partition_key": partition_key,
                "n": len(dates),
                "span_days": span,
                "n_articles": len(group),
                "dates": dates,
                "start_date": dates[0],
                "end_date": dates[-1],
            }
        )
        for a in sorted(group, key=lambda a: (a["date"], a["article_id"])):
            tce_articles.append(
                {"tce_id": tce_id, "article_id": a["article_id"], "date": a["date"], "k": k_of[a["date"]]}
            )
    return tces, tce_articles, rejects


def limit_tces(
    tces: list[dict[str, Any]],
    tce_articles: list[dict[str, Any]],
    max_tces: int | None,
    max_articles_per_day: int | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """Demo/test limits: keep the first ``max_tces`` TCEs (by start date, then id) and at most
    ``max_articles_per_day`` articles per day (lowest article id first). Returns the kept TCEs, their
    article rows and the dropped article rows with reasons. ``n_articles`` is updated; the timeline
    (dates, n, span) is not, because every day keeps at least one article."""
    order = sorted(tces, key=lambda t: (t["start_date"], t["tce_id"]))
    keep = {t["tce_id"] for t in (order if max_tces is None else order[:max_tces])}
    per_day: dict[tuple[str, int], int] = defaultdict(int)
    kept_rows, dropped = [], []
    for row in sorted(tce_articles, key=lambda r: (r["tce_id"], r["k"], r["article_id"])):
        if row["tce_id"] not in keep:
            dropped.append((row, "limit_max_tces"))
            continue
        per_day[(row["tce_id"], row["k"])] += 1
        if max_articles_per_day is not None and per_day[(row["tce_id"], row["k"])] > max_articles_per_day:
            dropped.append((row, "limit_max_articles_per_day"))
            continue
        kept_rows.append(row)
    counts: dict[str, int] = defaultdict(int)
    for row in kept_rows:
        counts[row["tce_id"]] += 1
    kept = [{**t, "n_articles": counts[t["tce_id"]]} for t in order if t["tce_id"] in keep]
    return kept, kept_rows, dropped
