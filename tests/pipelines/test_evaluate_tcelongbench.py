"""TCELongBench's evaluation protocol (S10) with the scripted backend: retriever measures,
Retrieve Once vs One by One with the date-only baseline, long-context trimming, and BLEU /
METEOR for open forecasts."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from pipelines.benchmarks import write_eval_items
from pipelines.evaluate import run as evaluate
from pipelines.evaluate.forecast import BY_DATE
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ship_script
from tests.fixtures.evaluate.data import ARTICLE_ROWS, utc
from udfs.cli import InputError

DATES = {article_id: published for article_id, published, _, _ in ARTICLE_ROWS}
BEFORE_MAY = [a for a, published in DATES.items() if published and published < utc(2024, 5, 1)]
COMMON = {
    "benchmark": "tcelongbench",
    "split": "test",
    "t_cut": utc(2024, 5, 1),
    "context_article_ids": BEFORE_MAY,
}
DETAIL = {
    **COMMON,
    "item_id": "tlb-detail",
    "task": "detail",
    "type": "mc",
    "question": "What did the engineers inspect at the Varna river port?",
    "choices": ["The damaged quay", "A ferry", "The city hall", "The festival boats"],
    "gold_index": 0,
    "evidence_article_ids": ["a-quay"],
    "evidence_dates": [DATES["a-quay"].date()],
}
ORDER_CHOICES = [
    "Council approves harbour repair budget.",
    "Floods close the Varna river port.",
    "Engineers inspect the damaged quay.",
]
ORDER = {
    **COMMON,
    "item_id": "tlb-order",
    "task": "order",
    "type": "ordering",
    "question": "Arrange the following events in chronological order.",
    "choices": ORDER_CHOICES,
    "gold_order": [1, 2, 0],
    "evidence_dates": [DATES[a].date() for a in ("a-floods", "a-quay", "a-budget")],
}
ANSWER = "The port reopens to cargo ships"
OPEN = {
    **COMMON,
    "item_id": "tlb-forecast:open",
    "task": "forecast_open",
    "type": "open",
    "question": "What will happen at the Varna river port on 2024-04-18?",
    "gold_texts": [ANSWER],
    "t_cut": utc(2024, 4, 18),
    "context_article_ids": [a for a in BEFORE_MAY if DATES[a] < utc(2024, 4, 18)],
    "gold_article_ids": ["a-reopen"],
}


def choose(variables: dict) -> dict[str, float]:
    return {c["label"]: 0.9 if c["text"] == "The damaged quay" else 0.1 / 3 for c in variables["choices"]}


SCRIPT = {
    "evaluate.forecast_choice": choose,
    "evaluate.forecast_order": lambda v: " B,C,A",
    "evaluate.forecast_answer": lambda v: " " + ANSWER,
    "evaluate.judge_answer": lambda v: "Yes" if v["prediction"] == v["label"] else "No",
}
LLM = LLMConfig(backend="scripted", model="tlb", script=ship_script(SCRIPT), batch_size=8)


@pytest.fixture(scope="module")
def root(toy_index, copy_root) -> str:
    """The toy corpus and its index with the job's defaults (passage tables full text only: the
    session's ``toy_index``, copied) and the items."""
    root = copy_root(toy_index)
    write_eval_items(root, "tcelongbench", [DETAIL, ORDER, OPEN])
    return root


@pytest.fixture(scope="module")
def outcome(root):
    config = evaluate.Config(
        root=root, llm=LLM, modes=("retrieval", "long_context"), retrievers=("bm25",), k=1, context_words=45
    )
    return evaluate.run(config)


def _board(outcome, model: str = "tlb") -> dict:
    return {
        (r["task"], r["setting"]): r
        for r in outcome.reports["leaderboard"].to_pylist()
        if r["model"] == model
    }


def test_retriever_measures_and_both_order_strategies(outcome):
    board = _board(outcome)
    detail = board[("detail", "retrieval-bm25.choice")]
    assert (detail["acc_doc"], detail["acc_date"], detail["acc_dates"]) == (1.0, 1.0, None)
    once, each = (
        board[("order", "retrieval-bm25.generate")],
        board[("order", "retrieval-bm25-one_by_one.generate")],
    )
    assert once["acc_dates"] == 0.0 and each["acc_dates"] == 1.0  # one query shows 1 chunk; one by one, 3
    rows = {(r["item_id"], r["setting"]): r for r in outcome.results}
    shown = rows[("tlb-order", "retrieval-bm25-one_by_one.generate")]["retrieved_ids"]
    assert [i.split("#")[0] for i in shown] == ["a-floods", "a-quay", "a-budget"]  # oldest first
    by_date = _board(outcome, BY_DATE)[("order", "retrieval-bm25-one_by_one.generate")]
    assert (by_date["accuracy"], by_date["levenshtein"], by_date["n"]) == (1.0, 0.0, 1)


def test_dense_chunks_need_the_index_passage_vectors_and_stop_the_run_at_once(root):
    """Chunks are searched in the index's 512-word passages, full text only by default: bm25 runs
    on them (above); asking for hybrid stops the run before any stage, naming the index flag."""
    config = evaluate.Config(root=root, llm=LLM, modes=("retrieval",), retrievers=("bm25", "hybrid"), k=1)
    with pytest.raises(InputError, match=r"passages_512 .* has no vectors .* --passage-vectors 512 to embed"):
        evaluate.run(config)


def test_long_context_drops_the_newest_but_never_the_evidence_day(outcome):
    rows = {(r["item_id"], r["setting"]): r for r in outcome.results}
    kept = rows[("tlb-detail", "long_context.choice")]["retrieved_ids"]
    oldest_first = sorted(BEFORE_MAY, key=lambda a: DATES[a])
    assert "a-quay" in kept and kept == oldest_first[: len(kept)] and len(kept) < len(BEFORE_MAY)
    order_kept = rows[("tlb-order", "long_context.generate")]["retrieved_ids"]
    assert {"a-floods", "a-quay", "a-budget"} <= set(order_kept) and "a-master" not in order_kept
    forecast_kept = rows[("tlb-forecast:open", "long_context.generate")]["retrieved_ids"]
    assert forecast_kept[-1] == "a-ferry" and "a-floods" not in forecast_kept  # the newest stay
    assert all(
        d < utc(2024, 4, 18) for d in rows[("tlb-forecast:open", "long_context.generate")]["retrieved_dates"]
    )


def test_open_forecasts_get_bleu_and_meteor(outcome):
    row = _board(outcome)[("forecast_open", "retrieval-bm25.generate")]
    assert row["accuracy"] == 1.0 and math.isclose(row["bleu"], 100.0) and row["meteor"] > 99.0
    assert all(
        dt.date(2024, 4, 18) > d.date()
        for r in outcome.results
        for d in r["retrieved_dates"] or []
        if r["item_id"] == "tlb-forecast:open"
    )
