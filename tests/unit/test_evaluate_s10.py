"""TCELongBench S10 measures on hand-made inputs: BLEU / METEOR of short answers, the retriever
measures (Acc_Doc, Acc_Date, Acc_Dates), the date-only ordering baseline, long-context trimming."""

from __future__ import annotations

import datetime as dt

import pytest

from udfs import metrics
from udfs.evaluate import long_context, overlap, retrieval_metrics
from udfs.evaluate.long_context import Doc


def day(n: int) -> dt.date:
    return dt.date(2024, 1, n)


def at(n: int) -> dt.datetime:
    return dt.datetime(2024, 1, n, 9, tzinfo=dt.UTC)


def test_word_overlap_scores():
    gold = ["The port reopens to cargo ships"]
    assert overlap.bleu("the port reopens to cargo ships.", gold) == pytest.approx(100.0)
    assert overlap.bleu("", gold) == 0.0 and overlap.meteor("  ", gold) == 0.0
    assert overlap.bleu("a volcano erupts", gold) < 1.0
    exact = overlap.meteor("the port reopens to cargo ships", gold)
    stemmed = overlap.meteor("the port reopened to cargo ship", gold)
    unrelated = overlap.meteor("a volcano erupts downtown", gold)
    assert exact > 99.0 and unrelated == 0.0
    assert stemmed == pytest.approx(exact)  # Porter stems match as fully as exact words
    assert 0.0 < overlap.meteor("the harbour reopens", gold) < 50.0
    # no WordNet: a synonym does not match (it would with WordNet)
    assert overlap.meteor("vessels", ["ships"]) == 0.0


def test_retriever_measures_on_toy_outputs():
    detail = {"evidence_article_ids": ["a"], "evidence_dates": [day(5)]}
    assert retrieval_metrics.hits(detail, ["a#2", "b"], [at(5), at(7)]) == {
        "hit_doc": True,
        "hit_date": True,
        "hit_dates": None,
    }
    assert retrieval_metrics.hits(detail, ["b", "c"], [at(4), at(7)]) == {
        "hit_doc": False,
        "hit_date": False,
        "hit_dates": None,
    }
    order = {"evidence_dates": [day(3), day(5), day(9)]}
    assert retrieval_metrics.hits(order, ["x", "y", "z"], [at(9), at(3), at(5)])["hit_dates"] is True
    assert retrieval_metrics.hits(order, ["x", "y"], [at(9), at(3)]) == {
        "hit_doc": None,
        "hit_date": True,
        "hit_dates": False,
    }
    assert retrieval_metrics.hits({}, ["x"], [at(1)]) == {
        "hit_doc": None,
        "hit_date": None,
        "hit_dates": None,
    }


def test_order_by_dates_and_its_score():
    assert retrieval_metrics.order_by_dates([at(9), at(3), at(5)]) == [1, 2, 0]
    assert retrieval_metrics.order_by_dates([None, at(3), at(3)]) == [1, 2, 0]  # ties keep order, None last
    assert metrics.levenshtein("ACB", "ABC") == 2


def _docs(*days: int) -> list[Doc]:
    return [Doc(f"d{n:02d}", day(n), 10) for n in days]


def test_long_context_detail_drops_the_newest_then_the_oldest_never_the_evidence_day():
    docs = _docs(1, 2, 3, 4, 5, 6)
    kept = long_context.trim(docs, 40, "detail", [day(3)], seed=0)
    assert [d.article_id for d in kept] == ["d01", "d02", "d03", "d04"]
    kept = long_context.trim(docs, 20, "detail", [day(3)], seed=0)
    assert [d.article_id for d in kept] == ["d02", "d03"]
    assert [d.article_id for d in long_context.trim(docs, 5, "detail", [day(3)], seed=0)] == ["d03"]


def test_long_context_forecast_keeps_the_newest():
    kept = long_context.trim(_docs(1, 2, 3, 4), 20, "forecast", [], seed=0)
    assert [d.article_id for d in kept] == ["d03", "d04"]
    assert long_context.rule_for("mc", []) == "forecast" and long_context.rule_for("mc", [day(1)]) == "detail"


def test_long_context_order_drops_outside_the_gold_span_first_then_random_inside():
    docs = _docs(1, 2, 3, 4, 5, 6, 7, 8, 9)
    gold = [day(2), day(5), day(8)]
    assert long_context.rule_for("ordering", gold) == "order"
    kept = long_context.trim(docs, 70, "order", gold, seed=0)
    assert [d.article_id for d in kept] == ["d02", "d03", "d04", "d05", "d06", "d07", "d08"]
    kept = long_context.trim(docs, 40, "order", gold, seed=0)
    ids = [d.article_id for d in kept]
    assert {"d02", "d05", "d08"} <= set(ids) and len(ids) == 4 and not {"d01", "d09"} & set(ids)
    assert ids == [d.article_id for d in long_context.trim(docs, 40, "order", gold, seed=0)]  # seeded
