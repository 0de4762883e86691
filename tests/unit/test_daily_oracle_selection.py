"""Daily Oracle selection: pre-filter boundaries, preprocessing, hot topics on synthetic days with
planted clusters, seeding, small days and the same-day guard."""

import datetime as dt
from collections import Counter

import pytest

from udfs.daily_oracle import selection as sel
from udfs.daily_oracle.selection import (
    FILL,
    HOT_TOPIC,
    RANDOM,
    TemporalLeakError,
    check_same_day,
    prefilter,
    preprocess,
    select_day,
    topic_clusters,
)

DAY = dt.date(2022, 9, 18)
NOON = dt.datetime(2022, 9, 18, 12, tzinfo=dt.UTC)


def article(i, **kw):
    row = {
        "article_id": f"a{i:03d}",
        "url": f"https://www.npr.org/2022/09/18/{i}/story",
        "canonical_url": f"https://npr.org/2022/09/18/{i}/story",
        "host": "npr.org",
        "title": f"Story {i}",
        "text": "x" * 2000 + str(i),
        "text_hash": f"h{i}",
        "language": "en",
        "published_at": NOON,
    }
    return {**row, **kw}


@pytest.mark.parametrize(
    ("length", "kept"), [(800, False), (801, True), (5000, True), (9_999, True), (10_000, False)]
)
def test_length_bounds_are_strict(length, kept):
    got, dropped = prefilter([article(1, text="y" * length)], ["npr.org"])
    assert bool(got) == kept
    if not kept:
        assert dropped[0][1] == ("too_short" if length <= 800 else "too_long")


def test_prefilter_reasons():
    rows = [
        article(1),
        article(2, title="Opinion: the storm"),
        article(3, title="opinion: lower case is kept"),
        article(4, url="https://edition.cnn.com/2022/09/18/opinions/x/index.html", host="edition.cnn.com"),
        article(5, host="edition.cnn.com", url="https://edition.cnn.com/2022/09/18/us/x"),
        article(6, host="foxnews.com"),
        article(7, language="es"),
        article(8, published_at=None),
        article(9, canonical_url=article(1)["canonical_url"], published_at=NOON + dt.timedelta(hours=1)),
        article(10, text_hash="h1", published_at=NOON + dt.timedelta(hours=2)),
    ]
    kept, dropped = prefilter(rows, ["npr.org", "cnn.com"])
    assert [a["article_id"] for a in kept] == ["a001", "a003", "a005"]
    assert {a["article_id"]: r for a, r in dropped} == {
        "a002": "opinion_title",
        "a004": "opinion_url",
        "a006": "publisher",
        "a007": "language",
        "a008": "undated",
        "a009": "duplicate_url",
        "a010": "duplicate_text",
    }
    assert len(kept) + len(dropped) == len(rows)


def test_duplicates_keep_the_earliest():
    late = article(1, published_at=NOON + dt.timedelta(hours=3))
    early = article(2, text_hash="h1", published_at=NOON)
    kept, dropped = prefilter([late, early], ["npr.org"])
    assert [a["article_id"] for a in kept] == ["a002"] and dropped[0][0]["article_id"] == "a001"


def test_preprocess():
    text = "The U.S. refineries were running at 2.75 million barrels; BP's CEO said so."
    words = preprocess(text).split()
    assert "refinery" in words and "run" in words and "barrel" in words
    assert all(w.isalpha() and w.islower() and len(w) > 2 for w in words)
    assert not {"the", "were", "said", "at"} & set(words)  # stop words and short tokens dropped


TOPICS = {
    "storm": "hurricane fiona puerto rico rainfall flooding landslide power outage island governor emergency",
    "vote": "senate election ballot candidate primary campaign voter turnout polling district",
    "game": "quarterback touchdown stadium playoff coach season league football fans injury",
}


def planted_day(sizes=(6, 5, 4), noise=6):
    """Clusters of the given sizes (storm, vote, game) plus unrelated noise articles."""
    docs, truth = [], {}
    for (topic, words), size in zip(TOPICS.items(), sizes, strict=False):
        vocab = words.split()
        for k in range(size):
            truth[f"{topic}{k}"] = topic
            docs.append((f"{topic}{k}", " ".join(vocab[: 8 + k % 3]) + f" report{k} update"))
    for k in range(noise):
        docs.append((f"noise{k}", unique_words(k)))
    return [d[0] for d in docs], [d[1] for d in docs], truth


def unique_words(k: int, n: int = 6) -> str:
    """Letters-only words no other document shares (digits vanish in preprocessing)."""
    return " ".join(f"zz{chr(97 + k // 26)}{chr(97 + k % 26)}{chr(97 + j)}q" for j in range(n))


def test_planted_clusters_are_found_in_size_order():
    ids, texts, truth = planted_day()
    clusters = topic_clusters([preprocess(t) for t in texts], pca_seed=1)
    assert [c.size for c in clusters] == [6, 5, 4] and all(c.coherent for c in clusters)
    for cluster, topic in zip(clusters, TOPICS, strict=True):
        assert {truth[ids[m]] for m in cluster.members} == {topic}
    picks = select_day(DAY, ids, texts, global_seed=7, n_random=0, n_hot=3).picks
    assert [p.selection for p in picks] == [HOT_TOPIC] * 3
    assert [truth[p.article_id] for p in picks] == ["storm", "vote", "game"]
    assert [p.cluster_size for p in picks] == [6, 5, 4]


def test_selection_is_deterministic_and_never_picks_twice():
    ids, texts, _ = planted_day()
    a = select_day(DAY, ids, texts, global_seed=7)
    b = select_day(DAY, list(reversed(ids)), list(reversed(texts)), global_seed=7)
    assert a.picks == b.picks  # input order does not matter
    assert [p.selection for p in a.picks] == [RANDOM] * 3 + [HOT_TOPIC] * 3
    assert len({p.article_id for p in a.picks}) == 6
    others = {tuple(p.article_id for p in select_day(DAY, ids, texts, global_seed=s).picks) for s in range(8)}
    assert len(others) > 1  # the seed matters


def test_random_pick_inside_a_cluster_is_redrawn_from_the_rest():
    ids, texts, truth = planted_day(sizes=(3, 3, 3), noise=0)
    for seed in range(10):
        picks = select_day(DAY, ids, texts, global_seed=seed, n_random=3, n_hot=3).picks
        assert len({p.article_id for p in picks}) == len(picks) == 6
        hot = [p for p in picks if p.selection == HOT_TOPIC]
        randoms = Counter(truth[p.article_id] for p in picks if p.selection == RANDOM)
        hot_topics = [truth[p.article_id] for p in hot]
        # a cluster hit by a random pick is drawn from its other members; only a cluster taken
        # whole by the random picks gives no hot-topic pick
        assert sorted(hot_topics) == sorted(t for t in TOPICS if randoms[t] < 3)
        assert len(hot) + sum(p.selection == FILL for p in picks) == 3


def chain_day(n=20):
    """A chain of articles: neighbours share most words, the ends share none (one loose cluster)."""
    vocab = [f"term{chr(97 + k // 26)}{chr(97 + k % 26)}" for k in range(2 * n + 10)]
    return [f"c{i}" for i in range(n)], [" ".join(vocab[2 * i : 2 * i + 10]) for i in range(n)]


def test_loose_cluster_is_skipped_and_slots_are_filled():
    ids, texts = chain_day()
    (cluster,) = topic_clusters(texts, pca_seed=1)
    assert cluster.size == len(ids) and cluster.mean_distance > 0.7 and not cluster.coherent
    picks = select_day(DAY, ids, texts, global_seed=3).picks
    assert [p.selection for p in picks] == [RANDOM] * 3 + [FILL] * 3


def test_diagonal_option_changes_the_mean():
    _, texts, _ = planted_day()
    docs = [preprocess(t) for t in texts]
    with_diag = topic_clusters(docs, 1)[0].mean_distance
    without = topic_clusters(docs, 1, exclude_diagonal=True)[0].mean_distance
    assert without == pytest.approx(with_diag * 6 / 5)


def test_fewer_valid_clusters_are_filled():
    ids, texts, _ = planted_day(sizes=(5,), noise=6)
    picks = select_day(DAY, ids, texts, global_seed=1, n_random=3, n_hot=3).picks
    kinds = [p.selection for p in picks]
    assert (
        kinds.count(HOT_TOPIC) == 1 and kinds.count(FILL) == 2 and len(set(p.article_id for p in picks)) == 6
    )


@pytest.mark.parametrize(
    ("n", "expected"), [(0, []), (2, [RANDOM] * 2), (3, [RANDOM] * 3), (4, [RANDOM] * 3 + [FILL])]
)
def test_small_days(n, expected):
    ids = [f"s{i}" for i in range(n)]
    texts = [unique_words(i) for i in range(n)]
    assert [p.selection for p in select_day(DAY, ids, texts, global_seed=0).picks] == expected


@pytest.mark.parametrize(("n", "pca"), [(99, False), (100, True)])
def test_pca_only_from_100_articles(monkeypatch, n, pca):
    import sklearn.decomposition

    calls = []
    real = sklearn.decomposition.PCA

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sklearn.decomposition, "PCA", recording)
    docs = [" ".join(f"w{(i * 7 + j) % 400}x" for j in range(30)) for i in range(n)]
    topic_clusters(docs, pca_seed=5)
    assert bool(calls) == pca
    if pca:
        assert calls[0]["n_components"] == sel.PCA_DIMS


def test_a_late_article_is_refused():
    rows = [article(1), article(2, published_at=dt.datetime(2022, 9, 19, 0, 30, tzinfo=dt.UTC))]
    with pytest.raises(TemporalLeakError, match="a002"):
        check_same_day(rows, DAY)
    check_same_day(rows[:1], DAY)
