"""Assembling the benchmark tables and evaluation items (no model): forecast items exclude the
last day, detail gold stays before it, and an article of the last day injected into the context
stops the build before anything is written."""

import datetime as dt

import pytest

from udfs.retrieval import LeakageError
from udfs.tcelongbench import assemble as assembly

D = dt.date(2015, 9, 1)
DATES = [D, D + dt.timedelta(days=3), D + dt.timedelta(days=6)]
TCE = {
    "tce_id": "t1",
    "partition_key": "all",
    "n": 3,
    "span_days": 6,
    "n_articles": 3,
    "dates": DATES,
    "start_date": DATES[0],
    "end_date": DATES[-1],
}
ARTICLES = [{"tce_id": "t1", "article_id": f"a{k}", "date": d, "k": k} for k, d in enumerate(DATES, start=1)]


def question(task: str, k: int) -> dict:
    return {
        "qa_id": f"{task}-q",
        "tce_id": "t1",
        "task": task,
        "question": "What will happen after 2015-09-07?",
        "answer": "gold answer",
        "choices": ["gold answer", "misread", "other day", "unsupported"],
        "choice_types": ["correct", "misread", "other_day", "unsupported"],
        "kp_ids": [f"kp{k}"],
        "point": "a key point",
        "gold_article_id": f"a{k}",
        "date": DATES[k - 1],
        "background2_article_id": "a1",
        "background2_date": DATES[0],
        "evidence_sentence": "a sentence",
        "evidence_match": 1.0,
        "votes": ["AB", "AB", "AA"],
        "votes_passed": 2,
    }


def assemble(questions):
    return assembly.assemble([TCE], ARTICLES, [], [], questions, {"t1": "test"}, seed=0)


def test_items_context_is_days_before_the_last():
    tables, items = assemble([question("detail", 2), question("forecast", 3)])
    assert tables["qa_detail"].num_rows == 1 and tables["qa_forecast"].num_rows == 1
    assert [i["type"] for i in items] == ["mc", "mc", "open"]
    for item in items:
        assert item["context_article_ids"] == ["a1", "a2"]
        assert item["t_cut"] == dt.datetime(2015, 9, 7, tzinfo=dt.UTC)
    assert items[1]["gold_article_ids"] == ["a3"] and items[2]["gold_texts"] == ["gold answer"]
    assert tables["context"].column("article_id").to_pylist() == ["a1", "a2"]


def test_injected_late_article_in_the_context_is_caught(monkeypatch):
    real = assembly.context_articles

    def leaky(tce_articles, tces):
        return [*real(tce_articles, tces), {**ARTICLES[2], "cutoff_date": DATES[1]}]

    monkeypatch.setattr(assembly, "context_articles", leaky)
    with pytest.raises(LeakageError, match="a3"):
        assemble([question("forecast", 3)])


@pytest.mark.parametrize(("task", "k"), [("detail", 3), ("forecast", 2)])
def test_gold_dates_are_asserted(task, k):
    with pytest.raises(AssertionError, match="gold date"):
        assemble([question(task, k)])
