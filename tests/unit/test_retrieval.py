"""Time-constrained retrieval: the cutoff is applied inside the search, results are exact."""

import datetime as dt

import bm25s
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udfs.retrieval import BM25Index, DenseIndex, Hit, LeakageError, check_hits
from udfs.timeutil import to_utc

WORDS = [
    "storm",
    "election",
    "vote",
    "flood",
    "market",
    "rates",
    "bank",
    "court",
    "trial",
    "goal",
    "match",
    "river",
]
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

corpora = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.integers(0, 40 * 24)),
    min_size=1,
    max_size=25,
)


def _build(docs, strict):
    ids = [f"d{i:02d}" for i in range(len(docs))]
    stamps = [START + dt.timedelta(hours=h) for _, h in docs]
    texts = [" ".join(words) for words, _ in docs]
    return ids, stamps, texts, BM25Index(ids, stamps, texts, strict=strict)


def _brute_force(ids, stamps, texts, query, cutoff, k, strict, index):
    eligible = [i for i in range(len(ids)) if stamps[i] < cutoff]
    if strict:
        if not eligible:
            return []
        fresh = bm25s.BM25()
        fresh.index(
            bm25s.tokenize([texts[i] for i in eligible], stopwords="en", show_progress=False),
            show_progress=False,
        )
        q = [
            fresh.vocab_dict[t]
            for t in bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
            if t in fresh.vocab_dict
        ]
        scores = dict(zip(eligible, fresh.get_scores(q) if q else np.zeros(len(eligible)), strict=True))
    else:
        full = index.scores(query, cutoff)
        position = {doc: n for n, doc in enumerate(index.corpus.doc_ids)}
        scores = {i: full[position[ids[i]]] for i in eligible}
    ranked = sorted((i for i in eligible if scores[i] > 0), key=lambda i: (-scores[i], stamps[i], ids[i]))
    return [ids[i] for i in ranked[:k]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpora,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    st.integers(0, 41 * 24),
    st.integers(1, 6),
    st.booleans(),
)
def test_no_hit_at_or_after_cutoff_and_topk_is_exact(docs, query_words, cutoff_hours, k, strict):
    ids, stamps, texts, index = _build(docs, strict)
    cutoff = START + dt.timedelta(hours=cutoff_hours)
    query = " ".join(query_words)
    hits = index.search(query, cutoff, k)
    assert all(h.published_at < cutoff for h in hits)
    expected = _brute_force(ids, stamps, texts, query, cutoff, k, strict, index)
    assert [h.doc_id for h in hits] == expected  # ties: earlier publication, then id, in both


def test_full_topk_of_eligible_documents_not_a_post_filter():
    ids = [f"n{i}" for i in range(12)]
    stamps = [START + dt.timedelta(days=i) for i in range(12)]
    # the most relevant documents are the newest: a post-filtered top-3 would return nothing
    texts = ["flood flood flood river" if i >= 9 else f"flood {WORDS[i]}" for i in range(12)]
    hits = BM25Index(ids, stamps, texts).search("flood river", START + dt.timedelta(days=9), k=3)
    assert len(hits) == 3 and all(h.published_at < START + dt.timedelta(days=9) for h in hits)


def test_cutoff_is_strict_and_dates_mean_midnight_utc():
    ids, stamps, texts = (
        ["a", "b"],
        [dt.date(2024, 3, 1), dt.datetime(2024, 3, 1, 23, 59)],
        ["flood", "flood"],
    )
    index = BM25Index(ids, stamps, texts)
    assert index.search("flood", dt.date(2024, 3, 1), 5) == []
    assert {h.doc_id for h in index.search("flood", dt.date(2024, 3, 2), 5)} == {"a", "b"}
    assert to_utc(dt.date(2024, 3, 1)) == dt.datetime(2024, 3, 1, tzinfo=dt.UTC)


def test_excluded_ids_never_return():
    index = BM25Index(["gold", "other"], [START, START], ["storm storm", "storm"])
    assert [h.doc_id for h in index.search("storm", START + dt.timedelta(days=1), 2, exclude=["gold"])] == [
        "other"
    ]


def test_injected_late_row_fails_the_run():
    with pytest.raises(LeakageError):
        check_hits([Hit("x", START + dt.timedelta(days=2), 1.0, 0)], START + dt.timedelta(days=1))


def test_undated_documents_are_refused():
    with pytest.raises(ValueError, match="undated"):
        BM25Index(["a"], [None], ["text"])


def test_dense_search_respects_cutoff_and_ranks_by_meaning():
    ids = ["old-flood", "old-vote", "new-flood"]
    stamps = [START, START + dt.timedelta(days=1), START + dt.timedelta(days=5)]
    texts = [
        "Heavy rain floods the river valley",
        "Parliament votes on the budget",
        "Floods hit the valley again",
    ]
    index = DenseIndex(ids, stamps, texts)
    hits = index.search("river flooding after storms", START + dt.timedelta(days=3), k=2)
    assert [h.doc_id for h in hits] == ["old-flood", "old-vote"]
