"""S1 TCE formation: pre-cleaning reasons, the time feature, HDBSCAN on separable data, the span
filter with inclusive ends, and the demo limits."""

import datetime as dt
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from udfs.tcelongbench import tce

D0 = dt.date(2015, 9, 1)


def article(i: int, day: int, text: str = "x" * 600, **extra):
    published = dt.datetime(2015, 9, day, 12, tzinfo=dt.UTC)
    base = {
        "article_id": f"a{i:02d}",
        "canonical_url": f"https://example.org/{i}",
        "host": "example.org",
        "title": f"Title {i}",
        "text": text,
        "published_at": published,
        "language": "en",
        "near_duplicate_of": None,
    }
    return {**base, **extra}


def test_preclean_gives_every_dropped_article_one_reason():
    rows = [
        article(1, 3),
        article(2, 3, published_at=None),
        article(3, 3, text="short"),
        article(4, 3, language="de"),
        article(5, 4, canonical_url="https://example.org/1"),
        article(6, 3, title="Title 1!"),  # same normalised title, same day
        article(7, 4, title="Title 1"),  # same title, another day: kept
        article(8, 4, near_duplicate_of="a01"),
        article(9, 5, text="nothing about the topic " * 40),
        article(10, 5, title="Title 10", canonical_url="https://example.org/7"),  # a07's, a day later
        article(11, 5, title="Title 11", canonical_url="https://example.org/12"),
        article(12, 5, title="Title 12"),  # a11's URL, the same day, a later id
    ]
    cleaner = tce.Precleaner(tce.TopicFilter(keywords=("x",)), min_chars=500, languages=("en",))
    kept, rejected = [], []
    for day in (None, 3, 4, 5):  # the undated partition, then the days in order
        day_kept, day_rejected = cleaner.day([a for a in rows if (a["published_at"] or D0).day == (day or 1)])
        kept, rejected = kept + day_kept, rejected + day_rejected
    assert [a["article_id"] for a in kept] == ["a01", "a07", "a11"]
    assert cleaner.seen_urls.dtype == np.int64 and len(cleaner.seen_urls) == 3  # 8 bytes a kept URL
    assert np.all(cleaner.seen_urls[1:] > cleaner.seen_urls[:-1])  # sorted, each once (no diff: overflow)
    assert kept[0]["date"] == dt.date(2015, 9, 3)
    assert {a["article_id"]: r for a, r in rejected} == {
        "a02": "no_date",
        "a03": "too_short",
        "a04": "language",
        "a05": "duplicate_url",
        "a06": "duplicate_title",
        "a08": "near_duplicate",
        "a09": "topic_filter",
        "a10": "duplicate_url",
        "a12": "duplicate_url",
    }


def test_windows_overlap_by_the_longest_span_and_skip_empty_stretches():
    days = [D0 + dt.timedelta(days=n) for n in (0, 100, 200, 600)]
    first, second, third, last = tce.windows(days, window_days=120, overlap_days=31)
    assert (first.start, first.own_end, first.end) == (D0, D0 + dt.timedelta(89), D0 + dt.timedelta(120))
    assert second.start == first.own_end and third.start == second.own_end  # every day is owned once
    assert third.end < days[3] and last.start == days[3] and last.own_end == last.end  # a gap skipped
    assert tce.windows([D0, D0 + dt.timedelta(5)], 120, 31) == [
        tce.Window(D0, D0 + dt.timedelta(120), D0 + dt.timedelta(120))
    ]
    assert tce.windows([], 120, 31) == []
    with pytest.raises(ValueError, match="longer than"):
        tce.windows([D0], 31, 31)


def test_topic_filter_hosts_and_partition_key():
    f = tce.TopicFilter(keywords=("Hungary",), hosts=("example.org",))
    assert f.admits(article(1, 3, text="Police in HUNGARY ...")) is True
    assert f.admits(article(1, 3, text="Police in Hungary", host="other.com")) is False
    assert tce.TopicFilter().key == "all" and f.key != "all"


def test_cluster_features_appends_scaled_days():
    vectors = np.eye(3, dtype=np.float32)
    f = tce.cluster_features(vectors, [D0, D0 + dt.timedelta(days=14), D0 + dt.timedelta(days=7)], 1.0, 14.0)
    assert f.shape == (3, 4)
    assert f[:, -1].tolist() == [0.0, 1.0, 0.5]
    assert tce.cluster_features(vectors, [D0] * 3, 2.0, 14.0)[:, -1].tolist() == [0.0] * 3


def test_hdbscan_separates_two_stories_and_marks_outliers():
    rng = np.random.default_rng(0)
    a = rng.normal([1, 0, 0], 0.02, (12, 3))
    b = rng.normal([0, 1, 0], 0.02, (12, 3))
    outlier = np.array([[5.0, 5.0, 5.0]])
    labels = tce.cluster_labels(np.vstack([a, b, outlier]), min_cluster_size=5, min_samples=3)
    assert len(set(labels[:12])) == 1 and len(set(labels[12:24])) == 1 and labels[0] != labels[12]
    assert labels[-1] == tce.NOISE
    assert (tce.cluster_labels(np.zeros((3, 3)), 10, 5) == tce.NOISE).all()


@pytest.mark.parametrize(
    ("span", "reason"),
    [(4, "tce_span_too_short"), (5, None), (30, None), (31, "tce_span_too_long"), (0, "tce_single_date")],
)
def test_span_filter_is_inclusive(span, reason):
    rows = [{**article(1, 1), "date": D0}, {**article(2, 1), "date": D0 + dt.timedelta(days=span)}]
    tces, members, rejects = tce.form_tces(rows, [0, 0], "all", 5, 30)
    if reason is None:
        (t,) = tces
        assert t["span_days"] == span and t["n"] == 2 and [m["k"] for m in members] == [1, 2]
        assert not rejects
    else:
        assert not tces and {r for _, r in rejects} == {reason}


def test_tce_id_is_stable_and_noise_is_rejected():
    rows = [{**article(i, 1), "date": D0 + dt.timedelta(days=i)} for i in range(7)]
    labels = [0, 0, 0, 0, 0, 0, -1]
    first, _, rejects = tce.form_tces(rows, labels, "all", 5, 30)
    again, _, _ = tce.form_tces(list(reversed(rows)), list(reversed(labels)), "all", 5, 30)
    assert first[0]["tce_id"] == again[0]["tce_id"]
    assert rejects == [(rows[6], "cluster_noise")]
    other, _, _ = tce.form_tces(rows, labels, "kw=x;hosts=", 5, 30)
    assert other[0]["tce_id"] != first[0]["tce_id"]


def test_limits_keep_first_tces_and_articles_per_day():
    rows = [{**article(i, 1), "date": D0 + dt.timedelta(days=i // 2)} for i in range(12)]
    tces, members, _ = tce.form_tces(rows, [0] * 6 + [1] * 6, "all", 1, 30)
    kept, kept_rows, dropped = tce.limit_tces(tces, members, max_tces=1, max_articles_per_day=1)
    assert len(kept) == 1 and kept[0]["start_date"] == D0
    assert kept[0]["n_articles"] == 3 == len(kept_rows)
    assert sorted({r for _, r in dropped}) == ["limit_max_articles_per_day", "limit_max_tces"]
    assert len(kept_rows) + len(dropped) == 12


def _story(rng, axis, days, dim=20):
    """One article a day on ``days`` (offsets from D0), vectors around the unit vector ``axis``
    (high-dimensional like text vectors: in three dimensions a blob's density wobbles enough for
    HDBSCAN to find topics in it)."""
    centre = np.eye(dim)[axis]
    return rng.normal(centre, 0.02, (len(days), dim)), [D0 + dt.timedelta(days=d) for d in days]


def test_a_long_cluster_of_one_topic_is_cut_at_gaps_then_into_equal_stretches():
    rng = np.random.default_rng(1)
    days = [*range(0, 70), *range(79, 100)]  # 70 days, 9 days without an article, 21 days
    vectors, dates = _story(rng, 0, days)
    short_vectors, short_dates = _story(rng, 1, range(10))
    labels = np.array([0] * len(days) + [1] * 10)
    split, n = tce.split_long_clusters(
        labels, np.vstack([vectors, short_vectors]), dates + short_dates, 30, 5, 3
    )
    assert n == 1 and (split[len(days) :] == 1).all()  # the short cluster keeps its label
    parts = [sorted(np.flatnonzero(split[: len(days)] == p)) for p in np.unique(split[: len(days)])]
    spans = sorted((days[p[0]], days[p[-1]]) for p in parts)
    # 70 days in 3 stretches of 24 (spans 23, 23, 21), then the stretch after the gap (20)
    assert spans == [(0, 23), (24, 47), (48, 69), (79, 99)]
    assert 1 not in set(split[: len(days)])


def test_a_long_cluster_of_two_topics_is_split_by_topic_before_time():
    rng = np.random.default_rng(2)
    a, a_dates = _story(rng, 0, range(0, 60))
    b, b_dates = _story(rng, 1, range(0, 60))
    split, n = tce.split_long_clusters(np.zeros(120, int), np.vstack([a, b]), a_dates + b_dates, 30, 5, 3)
    parts = [np.flatnonzero(split == p) for p in np.unique(split)]
    assert n == 1 and len(parts) == 4  # two topics, each cut in two stretches of 30 days
    assert all((p < 60).all() or (p >= 60).all() for p in parts)
    assert sorted(len(p) for p in parts) == [30, 30, 30, 30] and tce.NOISE not in split


@pytest.mark.parametrize(("empty_days", "cut"), [(6, False), (7, True)])
def test_a_week_without_an_article_ends_an_event(empty_days, cut):
    """10 days, ``empty_days`` without an article, 30 days: cut at the gap (then the 30 days are
    one part), or not (then the 46 days are cut in two equal stretches, the first of which holds
    the 10 days and the start of the 30)."""
    rng = np.random.default_rng(4)
    days = [*range(0, 10), *range(10 + empty_days, 40 + empty_days)]
    vectors, dates = _story(rng, 0, days)
    split, _ = tce.split_long_clusters(np.zeros(len(days), int), vectors, dates, 30, 5, 3)
    assert len(set(split[:10])) == 1 and len(set(split)) == 2
    assert (split[10] != split[0]) == cut
    assert len(set(split[10:])) == (1 if cut else 2)


def test_noise_joins_the_nearest_topic_and_large_min_samples_do_not_fail():
    """Two topics and three stray articles nearer one or the other: every article ends in the
    part of its own topic. ``min_samples`` above a cluster's size leaves it whole, no error."""
    rng = np.random.default_rng(5)
    a, a_dates = _story(rng, 0, range(0, 40))
    b, b_dates = _story(rng, 1, range(0, 40))
    strays = np.eye(20)[[0, 0, 1]] * 0.8 + np.eye(20)[2] * 0.6  # off both blobs, nearer 0, 0, 1
    dates = a_dates + b_dates + [D0 + dt.timedelta(days=d) for d in (3, 30, 12)]
    split, _ = tce.split_long_clusters(np.zeros(83, int), np.vstack([a, b, strays]), dates, 30, 5, 3)
    assert tce.NOISE not in split
    a_parts, b_parts = set(split[:40]) | set(split[80:82]), set(split[40:80]) | {split[82]}
    assert a_parts == set(split[:40]) and b_parts == set(split[40:80]) and not a_parts & b_parts
    whole, n = tce.split_long_clusters(
        np.zeros(12, int), a[:12], [D0, *a_dates[1:11], D0 + dt.timedelta(days=40)], 30, 10, 20
    )
    assert n == 1 and len(set(whole)) == 2  # one topic (too few for HDBSCAN): cut in time only


def test_noise_and_clusters_within_the_span_are_left_alone():
    rng = np.random.default_rng(3)
    vectors, dates = _story(rng, 0, range(0, 31))
    labels = np.array([0] * 30 + [tce.NOISE])
    split, n = tce.split_long_clusters(labels, vectors, dates, 30, 5, 3)
    assert n == 0 and (split == labels).all()
    empty, none = tce.split_long_clusters(np.zeros(0, int), np.zeros((0, 20)), [], 30, 5, 3)
    assert none == 0 and len(empty) == 0


def test_url_hashes_agree_across_processes():
    """A window's Precleaner is unpickled in another Ray worker; Python's ``hash`` of a string
    differs between processes, so a URL kept in one window was not a duplicate in the next."""
    url = "https://example.org/story/1"
    other = subprocess.run(
        [sys.executable, "-c", f"from udfs.tcelongbench import tce; print(tce.url_hash({url!r}))"],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(other.stdout) == tce.url_hash(url) != tce.url_hash(url + "2")
    cleaner = tce.Precleaner(tce.TopicFilter(), min_chars=0, languages=())
    cleaner.day([article(1, 3, canonical_url=url)])
    moved = pickle.loads(pickle.dumps(cleaner))
    kept, rejected = moved.day([article(2, 4, canonical_url=url)])
    assert not kept and [reason for _, reason in rejected] == ["duplicate_url"]
