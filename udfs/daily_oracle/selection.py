"""Daily article selection: pre-filters, then 3 random + 3 hot-topic articles per publication day.

Hot topics follow the authors' code (spec §3): the day's texts are tokenised and lemmatised,
TF-IDF is fit on that day only, reduced with PCA(100) when the day has at least 100 articles,
clustered with DBSCAN(eps=0.5, min_samples=3, cosine), clusters whose mean pairwise cosine
distance exceeds 0.7 are dropped, and one article is drawn from each of the three largest. Every
draw has its own seed, ``stable_seed(global_seed, day, what[, cluster])``, so a day's selection is
reproducible bit for bit and independent of the other days.

Offline deviations from the code's preprocessing (NLTK data cannot be downloaded here):
NLTK's ``TreebankWordTokenizer`` on the whole text instead of ``word_tokenize`` (which needs
punkt for sentence splitting), scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words) instead of NLTK's
list (179 words), and ``simplemma`` instead of the WordNet lemmatizer.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from udfs.ids import stable_seed
from udfs.urls import host_matches

DEFAULT_PUBLISHERS = ("cbsnews.com", "cnbc.com", "cnn.com", "forbes.com", "npr.org")
MIN_CHARS, MAX_CHARS = 800, 10_000  # kept iff MIN_CHARS < len(text) < MAX_CHARS
OPINION_SEGMENTS = frozenset({"opinion", "opinions"})  # cnn.com files opinion under /opinions/

# DBSCAN and the coherence gate, as in the authors' code.
DBSCAN_EPS, DBSCAN_MIN_SAMPLES = 0.5, 3
MAX_MEAN_DISTANCE = 0.7
PCA_MIN_DOCS, PCA_DIMS = 100, 100

RANDOM, HOT_TOPIC, FILL = "random", "hot_topic", "fill"


class TemporalLeakError(AssertionError):
    """An article outside the day being built reached that day's selection or prompts."""


def check_same_day(records: Iterable[dict[str, Any]], day: dt.date) -> None:
    """Raise TemporalLeakError unless every record was published on ``day`` (UTC): the question
    generator of day D may only see articles of day D."""
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    end = start + dt.timedelta(days=1)
    late = [
        r["article_id"]
        for r in records
        if r.get("published_at") is None or not start <= r["published_at"].astimezone(dt.UTC) < end
    ]
    if late:
        raise TemporalLeakError(f"articles not published on {day}: {late[:3]}")


def opinion_url(url: str | None) -> bool:
    """True when the URL's path has an ``opinion``/``opinions`` segment."""
    path = urlsplit(url or "").path.lower()
    return any(segment in OPINION_SEGMENTS for segment in path.split("/"))


def prefilter(
    articles: Sequence[dict[str, Any]], publishers: Iterable[str]
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """Split one day's articles into (kept, [(article, reason)]).

    In order: undated, language other than ``en``, host outside the publishers (subdomains
    match), text length not strictly between 800 and 10,000 characters, ``Opinion:`` in the title
    (case-sensitive), an ``/opinion(s)`` URL segment, then duplicates by URL and by text hash
    (the earliest published is kept, ties by article id)."""
    domains = frozenset(p.lower().removeprefix("www.") for p in publishers)
    kept: list[dict[str, Any]] = []
    dropped: list[tuple[dict[str, Any], str]] = []
    order = sorted(
        articles, key=lambda a: (a.get("published_at") is None, a.get("published_at"), a["article_id"])
    )
    seen_urls: set[str] = set()
    seen_texts: set[str] = set()
    for a in order:
        text = a.get("text") or ""
        if a.get("published_at") is None:
            reason = "undated"
        elif a.get("language") != "en":
            reason = "language"
        elif not host_matches(a.get("host"), domains):
            reason = "publisher"
        elif len(text) <= MIN_CHARS:
            reason = "too_short"
        elif len(text) >= MAX_CHARS:
            reason = "too_long"
        elif "Opinion:" in (a.get("title") or ""):
            reason = "opinion_title"
        elif opinion_url(a.get("url")):
            reason = "opinion_url"
        elif a["canonical_url"] in seen_urls:
            reason = "duplicate_url"
        elif a["text_hash"] in seen_texts:
            reason = "duplicate_text"
        else:
            seen_urls.add(a["canonical_url"])
            seen_texts.add(a["text_hash"])
            kept.append(a)
            continue
        dropped.append((a, reason))
    return kept, dropped


_TOKENIZER = None
_NON_ALPHA = re.compile(r"[^a-z]")


def preprocess(text: str) -> str:
    """Tokenise, lowercase, keep only ``[a-z]`` in each token, drop stop words and tokens of at
    most 2 letters, lemmatise, and join with spaces (the clustering input)."""
    global _TOKENIZER
    import simplemma
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    if _TOKENIZER is None:
        from nltk.tokenize import TreebankWordTokenizer

        _TOKENIZER = TreebankWordTokenizer()
    words = []
    for token in _TOKENIZER.tokenize(text or ""):
        word = _NON_ALPHA.sub("", token.lower())
        if len(word) > 2 and word not in ENGLISH_STOP_WORDS:
            words.append(simplemma.lemmatize(word, lang="en").lower())
    return " ".join(words)


@dataclass(frozen=True)
class Cluster:
    """One DBSCAN cluster of a day: member positions, mean pairwise cosine distance, and whether
    it passes the coherence gate."""

    label: int
    members: tuple[int, ...]
    mean_distance: float
    coherent: bool

    @property
    def size(self) -> int:
        return len(self.members)


def topic_clusters(docs: Sequence[str], pca_seed: int, exclude_diagonal: bool = False) -> list[Cluster]:
    """DBSCAN clusters of preprocessed documents, largest first (ties: lower label first).

    The mean distance is taken over the full n×n matrix with its zero diagonal (as the authors'
    code does) unless ``exclude_diagonal``; a cluster is coherent when it is at most 0.7."""
    from sklearn.cluster import DBSCAN
    from sklearn.decomposition import PCA
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_distances

    if len(docs) < DBSCAN_MIN_SAMPLES:
        return []
    try:
        matrix = TfidfVectorizer().fit_transform(docs)
    except ValueError:  # every document is empty after preprocessing
        return []
    if len(docs) >= PCA_MIN_DOCS:
        dims = min(PCA_DIMS, matrix.shape[1])
        matrix = PCA(n_components=dims, random_state=pca_seed % (2**32)).fit_transform(matrix.toarray())
    labels = DBSCAN(eps=DBSCAN_EPS, min_samples=DBSCAN_MIN_SAMPLES, metric="cosine").fit_predict(matrix)
    clusters = []
    for label in sorted(set(labels.tolist()) - {-1}):
        members = tuple(int(i) for i in np.flatnonzero(labels == label))
        distances = cosine_distances(matrix[list(members)])
        n = len(members)
        mean = float(distances.sum() / (n * (n - 1) if exclude_diagonal else n * n))
        clusters.append(Cluster(label, members, mean, mean <= MAX_MEAN_DISTANCE))
    return sorted(clusters, key=lambda c: (-c.size, c.label))


@dataclass(frozen=True)
class Pick:
    """One selected article: how it was chosen and the seed of the draw that chose it."""

    article_id: str
    selection: str  # random | hot_topic | fill
    draw_seed: int
    cluster_id: int | None = None
    cluster_size: int | None = None
    cluster_mean_dist: float | None = None


@dataclass(frozen=True)
class DaySelection:
    picks: list[Pick]
    clusters: list[Cluster]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def select_day(
    day: dt.date,
    article_ids: Sequence[str],
    texts: Sequence[str],
    global_seed: int,
    n_random: int = 3,
    n_hot: int = 3,
    exclude_diagonal: bool = False,
) -> DaySelection:
    """Pick the day's articles: ``n_random`` uniformly (all when the day has no more), then one
    from each of the ``n_hot`` largest coherent clusters, then fill the hot-topic slots with
    uniformly drawn articles. Random picks are kept out of the hot-topic and fill pools (a clash
    within a cluster draws again from the rest of it), so no article is picked twice."""
    if len(article_ids) != len(texts):
        raise ValueError("article_ids and texts must have the same length")
    order = sorted(range(len(article_ids)), key=lambda i: article_ids[i])
    ids = [article_ids[i] for i in order]
    docs = [texts[i] for i in order]
    picks: list[Pick] = []

    seed = stable_seed(global_seed, day.isoformat(), RANDOM)
    if len(ids) <= n_random:
        chosen = list(range(len(ids)))
    else:
        chosen = [int(i) for i in _rng(seed).choice(len(ids), size=n_random, replace=False)]
    picks += [Pick(ids[i], RANDOM, seed) for i in chosen]
    taken = set(chosen)

    clusters = topic_clusters(
        [preprocess(d) for d in docs], stable_seed(global_seed, day.isoformat(), "pca"), exclude_diagonal
    )
    hot = [c for c in clusters if c.coherent][:n_hot]
    for cluster in hot:
        pool = [m for m in cluster.members if m not in taken]
        if not pool:
            continue
        seed = stable_seed(global_seed, day.isoformat(), HOT_TOPIC, cluster.label)
        member = pool[int(_rng(seed).integers(len(pool)))]
        taken.add(member)
        picks.append(
            Pick(ids[member], HOT_TOPIC, seed, cluster.label, cluster.size, round(cluster.mean_distance, 6))
        )

    need = n_hot - sum(p.selection == HOT_TOPIC for p in picks)
    pool = [i for i in range(len(ids)) if i not in taken]
    if need > 0 and pool:
        seed = stable_seed(global_seed, day.isoformat(), FILL)
        filled = _rng(seed).choice(len(pool), size=min(need, len(pool)), replace=False)
        picks += [Pick(ids[pool[int(k)]], FILL, seed) for k in filled]
    return DaySelection(picks, clusters)
