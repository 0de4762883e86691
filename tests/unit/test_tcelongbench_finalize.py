"""S9: QA dedup, seeded shuffles, the split by TCE, and the context leakage check with an
injected late article."""

import datetime as dt

import pytest

from udfs.embeddings import embed
from udfs.retrieval import LeakageError
from udfs.tcelongbench import finalize
from udfs.tcelongbench.context import check_items, context_articles
from udfs.timeutil import to_utc


def test_question_dedup_keeps_the_earlier_question():
    questions = [
        "Where did Hungarian police stop the migrant train?",
        "Who organised the march from Keleti station?",
        "Where did the Hungarian police stop the train carrying migrants?",
    ]
    assert finalize.dedup_questions(embed(questions), 0.8) == [None, None, 0]


def test_mc_shuffle_maps_back_and_is_deterministic():
    choices = ["gold", "b", "c", "d"]
    letters = set()
    for i in range(40):
        perm, letter = finalize.shuffle_choices(choices, f"qa{i}", seed=3)
        shown = [choices[p] for p in perm]
        assert sorted(perm) == [0, 1, 2, 3] and shown["ABCD".index(letter)] == "gold"
        assert finalize.shuffle_choices(choices, f"qa{i}", seed=3) == (perm, letter)
        letters.add(letter)
    assert letters == set("ABCD")
    assert any(
        finalize.shuffle_choices(choices, f"qa{i}", 3) != finalize.shuffle_choices(choices, f"qa{i}", 4)
        for i in range(10)
    )


def test_order_shuffle_gold_order_restores_chronology():
    dates = ["2015-09-01", "2015-09-04", "2015-09-09"]
    orders = set()
    for i in range(30):
        perm, gold, letters = finalize.shuffle_order(3, f"o{i}", seed=0)
        shown = [dates[p] for p in perm]
        assert [shown[g] for g in gold] == dates
        assert [shown["ABC".index(x)] for x in letters.split(",")] == dates
        assert finalize.shuffle_order(3, f"o{i}", seed=0) == (perm, gold, letters)
        orders.add(letters)
    assert len(orders) == 6


@pytest.mark.parametrize("n", [500, 2289])
def test_split_ratios_deterministic_and_disjoint(n):
    ids = [f"tce-{i}" for i in range(n)]
    splits = finalize.assign_splits(ids)
    assert splits == finalize.assign_splits(list(reversed(ids)))
    for name, ratio in zip(finalize.SPLITS, (0.7, 0.15, 0.15), strict=True):
        assert abs(sum(s == name for s in splits.values()) / n - ratio) <= 0.02
    assert set(splits) == set(ids)  # one split per TCE: disjoint by construction
    with pytest.raises(ValueError):
        finalize.assign_splits(ids, (0.8, 0.15, 0.15))


D = dt.date(2015, 9, 1)


def test_context_excludes_the_last_day_and_an_injected_late_article_is_caught():
    tces = [{"tce_id": "t", "dates": [D, D + dt.timedelta(days=3), D + dt.timedelta(days=6)]}]
    rows = [
        {"tce_id": "t", "article_id": "a1", "date": D, "k": 1},
        {"tce_id": "t", "article_id": "a2", "date": D + dt.timedelta(days=3), "k": 2},
        {"tce_id": "t", "article_id": "a3", "date": D + dt.timedelta(days=6), "k": 3},
    ]
    context = context_articles(rows, tces)
    assert [r["article_id"] for r in context] == ["a1", "a2"]
    assert {r["cutoff_date"] for r in context} == {D + dt.timedelta(days=3)}
    dates = {r["article_id"]: r["date"] for r in rows}
    item = {"item_id": "q", "t_cut": to_utc(D + dt.timedelta(days=6)), "context_article_ids": ["a1", "a2"]}
    check_items([item], dates)
    with pytest.raises(LeakageError, match="a3"):
        check_items([{**item, "context_article_ids": ["a1", "a3"]}], dates)
    with pytest.raises(LeakageError, match="unknown"):
        check_items([{**item, "context_article_ids": ["unknown"]}], dates)
