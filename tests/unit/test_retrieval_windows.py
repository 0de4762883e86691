"""Retrieval beyond the plain cutoff: lower bounds, allowed sets, excluded (gold) sources, chunks,
dense and hybrid (RRF) search — each checked against brute force over the eligible set."""

import datetime as dt

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udfs.embeddings import embed
from udfs.retrieval import (
    BM25Index,
    DenseIndex,
    EvidenceIndex,
    HybridIndex,
    chunk_documents,
    chunk_words,
    daily_oracle_window,
    first_words,
)

WORDS = ["storm", "election", "vote", "flood", "market", "rates", "bank", "court", "trial", "river"]
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

corpora = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.integers(0, 30 * 24)),
    min_size=1,
    max_size=16,
    unique_by=lambda d: " ".join(d[0]),
)
searches = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),  # query words
    st.integers(0, 31 * 24),  # cutoff (hours after START)
    st.one_of(st.none(), st.integers(0, 31 * 24)),  # since
    st.integers(1, 5),  # k
    st.sets(st.integers(0, 15), max_size=3),  # excluded positions (gold articles)
    st.one_of(st.none(), st.sets(st.integers(0, 15), max_size=8)),  # allowed positions
)


def _corpus(docs):
    ids = [f"d{i:02d}" for i in range(len(docs))]
    stamps = [START + dt.timedelta(hours=h) for _, h in docs]
    texts = [" ".join(words) for words, _ in docs]
    return ids, stamps, texts


def _eligible(ids, stamps, cutoff, since, exclude, within):
    return [
        i
        for i in range(len(ids))
        if stamps[i] < cutoff
        and (since is None or stamps[i] >= since)
        and ids[i] not in exclude
        and (within is None or ids[i] in within)
    ]


def _arguments(ids, search):
    words, cut_h, since_h, k, excl, allow = search
    cutoff = START + dt.timedelta(hours=cut_h)
    since = None if since_h is None else START + dt.timedelta(hours=since_h)
    exclude = {ids[i] for i in excl if i < len(ids)}
    within = None if allow is None else {ids[i] for i in allow if i < len(ids)}
    return " ".join(words), cutoff, since, k, exclude, within


def _ranked(eligible, scores, stamps, ids):
    return sorted(eligible, key=lambda i: (-scores[i], stamps[i], ids[i]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, searches, st.booleans())
def test_bm25_windows_and_sets_equal_brute_force(docs, search, strict):
    ids, stamps, texts = _corpus(docs)
    query, cutoff, since, k, exclude, within = _arguments(ids, search)
    index = BM25Index(ids, stamps, texts, strict=strict)
    hits = index.search(query, cutoff, k, exclude=exclude, since=since, within=within)
    eligible = _eligible(ids, stamps, cutoff, since, exclude, within)
    assert all(h.published_at < cutoff and h.doc_id in {ids[i] for i in eligible} for h in hits)
    full = index.scores(query, cutoff, since)
    position = {d: n for n, d in enumerate(index.corpus.doc_ids)}
    scores = {i: full[position[ids[i]]] for i in eligible}
    expected = [ids[i] for i in _ranked([i for i in eligible if scores[i] > 0], scores, stamps, ids)[:k]]
    assert [h.doc_id for h in hits] == expected


def bag_of_words(texts, name=None):
    """A cheap deterministic stand-in encoder (word counts; integer dot products, so ties are
    exact): the properties under test (eligibility, exact top-k, fusion) do not depend on the
    encoder, and MiniLM itself is tested in test_retrieval.py."""
    return np.array([[t.split().count(w) for w in WORDS] for t in texts], dtype=np.float64).reshape(
        len(texts), len(WORDS)
    )


@pytest.fixture
def cheap_encoder(monkeypatch):
    import udfs.embeddings

    monkeypatch.setattr(udfs.embeddings, "embed", bag_of_words)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(docs=corpora, search=searches)
def test_dense_and_hybrid_equal_brute_force(cheap_encoder, docs, search):
    ids, stamps, texts = _corpus(docs)
    query, cutoff, since, k, exclude, within = _arguments(ids, search)
    bm25 = BM25Index(ids, stamps, texts)
    dense = DenseIndex(ids, stamps, texts)
    hits = dense.search(query, cutoff, k, exclude=exclude, since=since, within=within)
    eligible = _eligible(ids, stamps, cutoff, since, exclude, within)
    assert all(h.published_at < cutoff for h in hits)
    # dense: similarity of independently embedded texts, ranked over the eligible set
    vectors, query_vector = bag_of_words(texts), bag_of_words([query])[0]
    cosine = {i: float(vectors[i] @ query_vector) for i in eligible}
    assert [h.doc_id for h in hits] == [ids[i] for i in _ranked(eligible, cosine, stamps, ids)[:k]]
    # hybrid: reciprocal rank fusion of the two rankings over the same eligible set
    hybrid = HybridIndex(bm25, dense, rrf_k=60, depth=4)
    fused_hits = hybrid.search(query, cutoff, k, exclude=exclude, since=since, within=within)
    position = {d: n for n, d in enumerate(bm25.corpus.doc_ids)}
    lexical = bm25.scores(query, cutoff, since)
    semantic = dense.scores(query)
    lex = {i: lexical[position[ids[i]]] for i in eligible}
    sem = {i: float(semantic[position[ids[i]]]) for i in eligible}
    fused: dict[int, float] = {}
    for ranking in (
        _ranked([i for i in eligible if lex[i] > 0], lex, stamps, ids)[:4],
        _ranked(eligible, sem, stamps, ids)[:4],
    ):
        for rank, i in enumerate(ranking, start=1):
            fused[i] = fused.get(i, 0.0) + 1 / (60 + rank)
    expected = [ids[i] for i in _ranked(list(fused), fused, stamps, ids)[:k]]
    assert [h.doc_id for h in fused_hits] == expected
    assert all(h.published_at < cutoff for h in fused_hits)


def test_daily_oracle_window_boundaries():
    d_res = dt.date(2024, 3, 10)
    since, until = daily_oracle_window(d_res)
    assert (since, until) == (dt.date(2019, 1, 1), dt.date(2024, 3, 9))
    assert daily_oracle_window(d_res, rag_cutoff=dt.date(2024, 3, 1))[1] == dt.date(2024, 3, 1)
    ids = ["old", "d-2", "d-1", "r", "r-1"]
    stamps = [
        dt.date(2018, 12, 31),
        dt.date(2024, 3, 8),
        dt.date(2024, 3, 9),
        dt.date(2024, 3, 1),
        dt.date(2024, 2, 29),
    ]
    index = BM25Index(ids, stamps, ["flood"] * 5, strict=True)
    got = {h.doc_id for h in index.search("flood", until, 10, since=since)}
    assert got == {"d-2", "r", "r-1"}  # d_res - 1 and pre-2019 excluded, d_res - 2 included
    capped = daily_oracle_window(d_res, rag_cutoff=dt.date(2024, 3, 1))
    assert {h.doc_id for h in index.search("flood", capped[1], 10, since=capped[0])} == {"r-1"}  # R excluded


def test_chunks_carry_their_source_and_gold_sources_never_return():
    ids, stamps, texts, sources = chunk_documents(
        ["gold", "other"], [START, START], ["flood " * 5 + "river " * 5, "flood river bank"], size=5
    )
    assert ids == ["gold#0", "gold#1", "other#0"] and sources == ["gold", "gold", "other"]
    index = BM25Index(ids, stamps, texts, sources=sources)
    hits = index.search("flood river", START + dt.timedelta(days=1), 5, exclude={"gold"})
    assert [h.doc_id for h in hits] == ["other#0"] and hits[0].source_id == "other"
    within = index.search("flood", START + dt.timedelta(days=1), 5, within={"gold"})
    assert {h.source_id for h in within} == {"gold"} and index.corpus.text("gold#1") == "river " * 4 + "river"


def test_word_helpers():
    assert chunk_words("a b c d e", 2) == ["a b", "c d", "e"] and chunk_words("", 3) == []
    assert first_words("one two  three", 2) == "one two"
    with pytest.raises(ValueError):
        chunk_words("a", 0)


def test_evidence_window_keeps_undated_and_is_inclusive():
    ids = ["before", "start", "end", "after", "undated"]
    dates = [
        START - dt.timedelta(days=1),
        START,
        START + dt.timedelta(days=3),
        START + dt.timedelta(days=4),
        None,
    ]
    index = EvidenceIndex(ids, dates, ["the port reopens"] * 5)
    query = embed(["the port reopens"])
    (found,) = index.search_vectors(query, START, START + dt.timedelta(days=3), 10)
    assert sorted(ids[i] for i in found) == ["end", "start", "undated"]
    (everything,) = index.search_vectors(query, START, None, 10)
    assert sorted(ids[i] for i in everything) == ["after", "end", "start", "undated"]
