"""PROPHET's evaluation protocol (§5) with the scripted backend: articles shown as their
summaries, naive RAG over the summaries, CIL-high / CIL-low inside the evidence set (eligible
articles only), ScratchPad answers, and per-split leaderboard rows."""

from __future__ import annotations

import math

import pytest

from pipelines.benchmarks import write_eval_items
from pipelines.evaluate import run as evaluate
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ship_script
from tests.fixtures.evaluate.data import ARTICLE_ROWS, utc
from udfs.eval_items import YES_NO

P1 = "Will the Varna river port reopen to cargo ships before May 2024?"
TITLES = {article_id: title for article_id, _, title, _ in ARTICLE_ROWS}
# p-1's evidence with its CIL; a-master (published after the cutoff) scores highest and must
# never be chosen, a-vote has no CIL
P1_SCORES = {
    "a-floods": -0.2,
    "a-quay": 0.3,
    "a-vote": None,
    "a-budget": 0.5,
    "a-ferry": -0.4,
    "a-reopen": 0.1,
    "a-master": 0.9,
}


def summary_of(title: str) -> str:
    """The scripted summary of an article; a-quay's is worded like p-1's question."""
    return P1 if title == TITLES["a-quay"] else f"In short, the article says: {title.lower()}"


def _item(item_id: str, split: str, gold: float, t_cut, scores: dict[str, float | None]) -> dict:
    return {
        "item_id": item_id,
        "benchmark": "prophet",
        "task": "binary",
        "split": split,
        "type": "binary_prob",
        "question": P1 if item_id == "p-1" else f"Will question {item_id} resolve Yes?",
        "background": ["Resolution criteria: resolves with the port authority's statement."],
        "choices": YES_NO,
        "gold_value": gold,
        "t_cut": t_cut,
        "t_resolve": t_cut,
        "context_article_ids": list(scores),
        "context_scores": list(scores.values()),
        "source_id": item_id,
    }


ITEMS = [
    _item("p-1", "L1", 1.0, utc(2024, 4, 19), P1_SCORES),
    _item("p-2", "L2", 0.0, utc(2024, 6, 1), {"a-strike": 0.2, "a-festival": 0.1}),
    _item("p-3", "none", 1.0, utc(2024, 6, 1), {}),
]


def scratchpad(variables: dict) -> str:
    """P(Yes) 0.8 when every shown document is its article's summary, 0.5 without context."""
    docs = variables["context"]
    p = 0.8 if docs and all(d["text"] == summary_of(d["title"]) for d in docs) else 0.5
    return f" No: few signs. Yes: the repairs. Weighing both: *{p}*"


SCRIPT = {
    "tcelongbench.article_summary": lambda v: " " + summary_of(v["title"]),
    "evaluate.forecast_scratchpad": scratchpad,
}


@pytest.fixture(scope="module")
def prophet_root(toy_index, copy_root) -> str:
    root = copy_root(toy_index)
    write_eval_items(root, "prophet", ITEMS)
    return root


def _run(root: str, runs: int = 1):
    llm = LLMConfig(backend="scripted", model="pad", script=ship_script(SCRIPT), batch_size=8)
    return evaluate.run(
        evaluate.Config(
            root=root,
            llm=llm,
            modes=("closed_book", "retrieval"),
            retrievers=("dense", "cil_high", "cil_low"),
            answer_formats=("scratchpad",),
            k=2,
            runs=runs,
        )
    )


def test_prophet_protocol_end_to_end(prophet_root):
    outcome = _run(prophet_root)
    got = {(r["item_id"], r["setting"]): r for r in outcome.results}
    # CIL-high / CIL-low: among the eligible scored articles only (a-master is after the cutoff)
    assert set(got[("p-1", "retrieval-cil_high.scratchpad")]["retrieved_ids"]) == {"a-budget", "a-quay"}
    assert set(got[("p-1", "retrieval-cil_low.scratchpad")]["retrieved_ids"]) == {"a-ferry", "a-floods"}
    assert got[("p-2", "retrieval-cil_high.scratchpad")]["retrieved_ids"] == ["a-strike"]
    assert got[("p-1", "retrieval-cil_high.scratchpad")]["n_eligible"] == 6
    # naive RAG: the summary worded like the question ranks first
    assert "a-quay" in got[("p-1", "retrieval-dense.scratchpad")]["retrieved_ids"]
    assert not any("a-master" in (r["retrieved_ids"] or []) for r in outcome.results)
    assert ("p-3", "retrieval-cil_high.scratchpad") not in got  # no scores: a rejected row
    assert {r["forecasting"] for r in outcome.results if "cil_" in r["setting"]} == {False}
    # leaderboard: one row per split; Brier ×100 by hand (0.8 on shown summaries, 0.5 without)
    board = {
        (r["setting"], r["split"]): r
        for r in outcome.reports["leaderboard"].to_pylist()
        if r["model"] == "pad"
    }
    assert math.isclose(board[("retrieval-cil_high.scratchpad", "L1")]["brier"], 100 * 0.2**2)
    assert math.isclose(board[("retrieval-cil_high.scratchpad", "L2")]["brier"], 100 * 0.8**2)
    assert ("retrieval-cil_high.scratchpad", "none") not in board
    assert {s for (setting, s) in board if setting == "closed_book.scratchpad"} == {"L1", "L2", "none"}
    assert all(
        math.isclose(board[("closed_book.scratchpad", s)]["brier"], 25.0) for s in ("L1", "L2", "none")
    )
    assert math.isclose(board[("retrieval-dense.scratchpad", "none")]["brier"], 25.0)  # nothing to show
    # every evidence article was summarised once; a rerun computes nothing new
    stage = next(s for s in outcome.summaries if s.name.endswith("_summaries/pad/article_summary"))
    assert stage.metrics["requests_unique"] == 9 and stage.metrics["requests_computed"] == 9
    again = next(s for s in _run(prophet_root).summaries if s.name.endswith("/article_summary"))
    assert again.metrics["requests_computed"] == 0 and again.metrics["requests_cached"] == 9


def test_repeated_runs_sample_every_answer_and_report_the_spread(prophet_root):
    outcome = _run(prophet_root, runs=2)
    runs = {(r["item_id"], r["setting"]): set() for r in outcome.results}
    for r in outcome.results:
        runs[(r["item_id"], r["setting"])].add(r["run"])
    assert runs and all(v == {0, 1} for v in runs.values())
    board = [r for r in outcome.reports["leaderboard"].to_pylist() if r["model"] == "pad"]
    assert board and all(r["runs"] == 2 and r["n"] % 2 == 0 for r in board)
    # the script answers the same in both runs: the spread is exactly 0
    assert all(r["brier_std"] == 0.0 for r in board)
    stage = next(s for s in outcome.summaries if s.name.endswith("/forecast_scratchpad"))
    assert stage.metrics["requests_total"] == len(outcome.results) == 2 * len(runs)  # one request per run
