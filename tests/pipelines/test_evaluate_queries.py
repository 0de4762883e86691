"""Topical retrieval queries: two OpenForecast items whose question text is the same fixed
sentence retrieve different articles, because each searches for its own event."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.evaluate.context import Corpus, RetrievalConfig
from udfs.openforecast.items import eval_item

pytestmark = [pytest.mark.ray]


def _ltf(ce: str, background: list[str], title: str) -> dict:
    sample = {
        "sample_id": f"ltf-{ce}",
        "task": "ltf",
        "split": "test",
        "question": None,
        "background": background,
        "gold_texts": ["whatever comes next"],
        "t_cut": dt.date(2024, 7, 1),
        "category": None,
    }
    return eval_item(sample, None, title)


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_two_ltf_items_retrieve_different_articles(toy_index, retriever):
    strike = _ltf("strike", ["Dock workers ask for higher pay."], "Dock workers strike over pay")
    ferry = _ltf("ferry", ["A ferry operator plans new coastal routes."], "Ferry summer routes")
    corpus, rc = Corpus(toy_index), RetrievalConfig(k=2)
    got = {
        name: corpus.retrieve(item, retriever, rc).ids
        for name, item in (("strike", strike), ("ferry", ferry))
    }
    assert "a-strike" in got["strike"] and "a-ferry" in got["ferry"]
    assert set(got["strike"]) != set(got["ferry"])
    # the fixed question alone (the query before topical queries) finds the same articles for both
    fixed = {
        name: corpus.retrieve({**item, "query": None}, retriever, rc).ids
        for name, item in (("s", strike), ("f", ferry))
    }
    assert fixed["s"] == fixed["f"]
