"""The index's own scores (udfs.scoring): BM25 and TF-IDF of a pool under given statistics, and
reciprocal-rank fusion, against the formulas written out by hand."""

import math

import pytest

from udfs.scoring import bm25_scores, rrf, tfidf_scores


def test_bm25_of_a_pool_is_the_lucene_formula_summed_over_distinct_query_terms():
    texts = ["Ferry ferry harbour", "A harbour crane", "Rail news"]
    df, n, tokens = {"ferry": 3, "harbour": 10}, 40, 400  # statistics of a window, not of the pool
    scores = bm25_scores("ferry harbour ferry", texts, df, n, tokens)

    def term(tf: int, dl: int, df: int) -> float:
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / (tokens / n)))

    assert scores == pytest.approx([term(2, 3, 3) + term(1, 3, 10), term(1, 3, 10), 0.0])


def test_a_term_the_window_never_saw_adds_nothing():
    assert bm25_scores("zeppelin", ["zeppelin zeppelin"], {}, 5, 50) == [0.0]
    assert tfidf_scores("zeppelin", ["zeppelin zeppelin"], {"zeppelin": 0}, 5) == [0.0]


def test_tfidf_is_drqa_s_dot_product_and_idf_is_never_negative():
    texts = ["glacier glacier melt", "melt"]
    df, n = {"glacier": 2, "melt": 30}, 50  # melt: in more than half the window, idf 0
    scores = tfidf_scores("glacier melt glacier", texts, df, n)
    idf = math.log((n - 2 + 0.5) / (2 + 0.5))
    assert scores == pytest.approx([math.log(3) * math.log(3) * idf**2, 0.0])


def test_rrf_sums_one_over_k_plus_rank_from_one():
    fused = rrf([["a", "b", "c"], ["c", "a"]])
    assert fused == pytest.approx({"a": 1 / 61 + 1 / 62, "b": 1 / 62, "c": 1 / 63 + 1 / 61})
    assert rrf([]) == {}
