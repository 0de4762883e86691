"""The harness end to end with the scripted backend: an oracle forecaster whose probabilities are
known, so every leaderboard number can be checked exactly; leakage aborts the run."""

from __future__ import annotations

import datetime as dt
import math
import re
import shutil

import pytest

from pipelines.evaluate import run as evaluate
from pipelines.evaluate.context import Corpus, RetrievalConfig
from pipelines.index.engine import ArticleIndex
from pipelines.llm.config import LLMConfig
from pipelines.llm.scripted import ship_script
from tests.fixtures.evaluate.data import toy_items, utc, write_toy_benchmark
from udfs import storage
from udfs.retrieval import LeakageError

pytestmark = [pytest.mark.ray]

ITEMS = {i["question"]: i for i in toy_items()}
P_RIGHT_MC, P_RIGHT_YN = 0.7, 0.8
# STF: p1 and p2 match gold 1 in stage 1, p3 is confirmed by an article in stage 2, p4 is wrong
# (OpenForecast spec §7 test vector: paper P .75 R .60 F1 .667; code .50 / .50 / .50).
EVENTS = [
    "The Varna river port reopens to cargo ships.",
    "Cargo barges are allowed back into the Varna harbour after the flood closure ends.",
    "The Varna harbour master steps down from his post.",
    "A volcano erupts under the Varna city hall.",
]
STAGE1 = {EVENTS[0]: 1, EVENTS[1]: 1}


def _yes_no(question: str) -> dict[str, float]:
    item = ITEMS[question]
    yes = item["gold_index"] == 0 if item["type"] == "yesno" else item["gold_value"] == 1.0
    return {"Yes": P_RIGHT_YN, "No": 1 - P_RIGHT_YN} if yes else {"Yes": 1 - P_RIGHT_YN, "No": P_RIGHT_YN}


def _mc(variables: dict) -> dict[str, float]:
    item = ITEMS[variables["question"]]
    right = item["choices"][item["gold_index"]]
    rest = (1 - P_RIGHT_MC) / (len(variables["choices"]) - 1)
    return {c["label"]: P_RIGHT_MC if c["text"] == right else rest for c in variables["choices"]}


def oracle_choice(variables: dict):
    return _mc(variables) if variables["choices"] else _yes_no(variables["question"])


def oracle_verbalized(variables: dict) -> str:
    """The rest of the JSON object the prompt opens, in its declared form (labels in order)."""
    return ", ".join(f'"{label}": {p:.3f}' for label, p in oracle_choice(variables).items())


def oracle_order(variables: dict) -> str:
    item = ITEMS[variables["question"]]
    return " " + ",".join("ABC"[i] for i in item["gold_order"])


def oracle_events(variables: dict) -> str:
    return " " + "\n".join(f"{n}. {e}" if n > 1 else e for n, e in enumerate(EVENTS, start=1))


def oracle_answer(variables: dict) -> str:
    return ITEMS[variables["question"]]["gold_texts"][0]


def judge_match(variables: dict) -> str:
    label = STAGE1.get(variables["prediction"])
    return f"Yes ({label})" if label else "No"


def judge_evidence(variables: dict) -> str:
    text = " ".join(variables["evidence"]).lower()
    return "Yes" if "harbour master resigned" in text and "steps down" in variables["prediction"] else "No"


def judge_answer(variables: dict) -> str:
    return "Yes" if variables["prediction"].lower() == variables["label"].lower() else "No"


SCRIPT = {
    "evaluate.forecast_choice": oracle_choice,
    "evaluate.forecast_verbalized": oracle_verbalized,
    "evaluate.forecast_order": oracle_order,
    "evaluate.forecast_events": oracle_events,
    "evaluate.forecast_answer": oracle_answer,
    "evaluate.judge_match": judge_match,
    "evaluate.judge_evidence": judge_evidence,
    "evaluate.judge_answer": judge_answer,
}


def oracle_llm() -> LLMConfig:
    return LLMConfig(backend="scripted", model="oracle", script=ship_script(SCRIPT), batch_size=16)


@pytest.fixture(scope="module")
def indexed_toy(toy_index, copy_root) -> str:
    root = copy_root(toy_index)
    write_toy_benchmark(root)
    return root


@pytest.fixture
def toy_root(indexed_toy, tmp_path) -> str:
    """A fresh copy of the toy root with its article index."""
    return str(shutil.copytree(indexed_toy, tmp_path / "root"))


def _rows(table, **where):
    return [r for r in table.to_pylist() if all(r[k] == v for k, v in where.items())]


def _check_retrieval_log(root: str) -> None:
    """Every retrieved article predates its item's cutoff, is no gold article, stays inside a
    fixed article set, and the log (eligible count, newest date, share under k) is complete."""
    rows = [
        r
        for r in storage.read_table(storage.join(root, "eval", "toy", "oracle", "results")).to_pylist()
        if r["mode"] == "retrieval"
    ]
    assert rows
    items = {i["item_id"]: i for i in toy_items()}
    for r in rows:
        item = items[r["item_id"]]
        assert r["retrieved_ids"], r["item_id"]
        assert all(d < item["t_cut"] for d in r["retrieved_dates"])
        assert not set(r["retrieved_ids"]) & set(item.get("gold_article_ids") or [])
        if item.get("context_article_ids"):
            assert set(r["retrieved_ids"]) <= set(item["context_article_ids"])
        assert r["newest_context_at"] == max(r["retrieved_dates"]) and r["n_eligible"] >= len(
            r["retrieved_ids"]
        )
        assert r["retrieved_dates"] == sorted(r["retrieved_dates"])  # oldest first
    summary = storage.read_json(storage.join(root, "eval", "summary.json"))
    logged = {(s["task"], s["setting"]): s for s in summary["retrieval"]}
    assert ("tf", "retrieval-hybrid.verbalized") in logged and logged[("tf", "retrieval-bm25.choice")][
        "items"
    ] == 3
    drift = storage.read_table(storage.join(root, "eval", "drift.parquet")).to_pylist()
    tf = [d for d in drift if d["task"] == "tf" and d["setting"] == "retrieval-bm25.choice"]
    assert [d["month"] for d in tf] == [dt.date(2024, 3, 1), dt.date(2024, 4, 1)] and [
        d["n"] for d in tf
    ] == [1, 2]
    assert [d["after_model_cutoff"] for d in tf] == [False, True]
    assert storage.read_bytes(storage.join(root, "eval", "drift.png"))[:8] == b"\x89PNG\r\n\x1a\n"


def test_oracle_scores_exactly(ray_local, toy_root):
    outcome = evaluate.run(
        evaluate.Config(
            root=toy_root,
            llm=oracle_llm(),
            retrievers=("bm25", "hybrid"),
            answer_formats=("choice", "verbalized"),
            model_cutoff=dt.date(2024, 4, 1),
            k=3,
            doc_words=40,
        )
    )
    board = outcome.reports["leaderboard"]
    assert storage.exists(storage.join(toy_root, "eval", "leaderboard.md"))
    oracle = _rows(board, model="oracle")
    assert oracle, "no oracle rows"
    yes_no_brier = 2 * (1 - P_RIGHT_YN) ** 2
    mc_brier = (1 - P_RIGHT_MC) ** 2 + 3 * ((1 - P_RIGHT_MC) / 3) ** 2
    for row in oracle:
        if row["task"] == "tf":
            assert (
                row["accuracy"] == 1
                and math.isclose(row["brier"], yes_no_brier)
                and row["brier_tag"] == "sum"
            )
        elif row["task"] == "mc":
            assert row["accuracy"] == 1 and math.isclose(row["brier"], mc_brier) and row["brier_tag"] == "sum"
        elif row["task"] == "binary":
            assert row["accuracy"] == 1 and row["brier_tag"] == "binary_x100"
            assert math.isclose(row["brier"], 100 * (1 - P_RIGHT_YN) ** 2)
        elif row["task"] == "order":
            assert (row["accuracy"], row["order_f1"], row["levenshtein"]) == (1.0, 1.0, 0.0)
        elif row["task"] == "stf":
            assert math.isclose(row["open_precision"], 0.75) and math.isclose(row["open_recall"], 0.6)
            assert math.isclose(row["open_f1"], 2 * 0.75 * 0.6 / 1.35) and math.isclose(
                row["open_f1_code"], 0.5
            )
        elif row["task"] == "aqa":
            assert row["accuracy"] == 1
        elif row["task"].startswith("All") and row["setting"].startswith("gold_context"):
            # binary items have no gold article: tf (3) and mc (2) only, both Brier tag "sum"
            assert row["n"] == 5 and row["accuracy"] == 1 and row["brier_tag"] == "sum"
            expected = (
                (3 * yes_no_brier + 2 * mc_brier) / 5
                if "micro" in row["task"]
                else (yes_no_brier + mc_brier) / 2
            )
            assert math.isclose(row["brier"], expected)
        elif row["task"].startswith("All"):
            assert row["n"] == 3 + 2 + 2 and row["accuracy"] == 1 and row["brier"] is None  # mixed tags
        assert row["refusal_rate"] == 0
    settings = {r["setting"] for r in oracle if r["task"] == "tf"}
    assert settings == {
        f"{m}.{a}"
        for m in ("closed_book", "retrieval-bm25", "retrieval-hybrid", "gold_context")
        for a in ("choice", "verbalized")
    }
    assert {r["forecasting"] for r in oracle if r["setting"].startswith("gold_context")} == {False}
    # baselines: uniform Brier 1 - 1/C (binary ×100: 25), expected accuracy 1/C; majority by hand
    uniform = {r["task"]: r for r in _rows(board, model="baseline:uniform")}
    assert math.isclose(uniform["tf"]["brier"], 0.5) and math.isclose(uniform["mc"]["brier"], 0.75)
    assert math.isclose(uniform["binary"]["brier"], 25.0) and math.isclose(uniform["tf"]["accuracy"], 0.5)
    assert math.isclose(uniform["order"]["accuracy"], 1 / 6) and math.isclose(
        uniform["order"]["levenshtein"], 10 / 6
    )
    majority = {r["task"]: r for r in _rows(board, model="baseline:majority")}
    assert math.isclose(majority["tf"]["accuracy"], 2 / 3) and math.isclose(majority["tf"]["brier"], 2 / 3)
    assert majority["order"]["accuracy"] == 1.0
    _check_retrieval_log(toy_root)


def oracle_text(variables: dict) -> str:
    """Free-text answers in each paper's form, right when answered; tf-2 and bin-2 refuse."""
    item = ITEMS[variables["question"]]
    if item["item_id"] in ("tf-2", "bin-2"):
        return "Nobody can know what the future holds." if item["type"] == "yesno" else "Probably yes."
    if variables["ask"] == "probability":
        return f"Rates rose twice already. *{0.8 if item['gold_value'] == 1.0 else 0.2}*"
    if variables["ask"] == "yesno":
        return f"{item['choices'][item['gold_index']]}, most likely."
    right = item["choices"][item["gold_index"]]
    label = next(c["label"] for c in variables["choices"] if c["text"] == right)
    return f"I pick ({label.lower()})." if item["item_id"] == "mc-1" else right


def test_free_text_answers_parse_the_papers_forms_and_count_refusals(toy_root):
    script = ship_script({**SCRIPT, "evaluate.forecast_text": oracle_text})
    llm = LLMConfig(backend="scripted", model="texter", script=script, batch_size=16)
    outcome = evaluate.run(
        evaluate.Config(root=toy_root, llm=llm, modes=("closed_book",), answer_formats=("text",))
    )
    board = {r["task"]: r for r in _rows(outcome.reports["leaderboard"], model="texter")}
    assert {board[t]["setting"] for t in ("tf", "mc", "binary")} == {"closed_book.text"}
    tf, mc, binary = board["tf"], board["mc"], board["binary"]
    # tf: 2 right, 1 refusal (wrong, uniform Brier 0.5); mc: both right; binary: 0.8 on the truth, 1 refusal
    assert (tf["n"], tf["n_answered"], tf["accuracy"], tf["accuracy_answered"]) == (3, 2, 2 / 3, 1.0)
    assert math.isclose(tf["refusal_rate"], 1 / 3) and math.isclose(tf["brier"], 0.5 / 3)
    assert (mc["accuracy"], mc["brier"], mc["refusal_rate"]) == (1.0, 0.0, 0.0)
    assert binary["accuracy"] == 0.5 and math.isclose(binary["brier"], (4.0 + 25.0) / 2)
    reasons = {r["item_id"]: r["refusal_reason"] for r in outcome.results if r["refusal"]}
    assert set(reasons) == {"tf-2", "bin-2"}
    assert "no yes or no" in reasons["tf-2"] and "no *probability*" in reasons["bin-2"]


def test_an_index_that_misdates_a_late_article_aborts_the_run(toy_root):
    """A stale index claims the late article was published early: the engine's prefilter and its
    own check pass it; the second check, against the articles table, stops the run (in the Ray
    worker that retrieved it)."""
    table = ArticleIndex(toy_root).table
    table.update(where="article_id = 'a-late'", values={"published_at": utc(2024, 1, 1)})
    with pytest.raises(LeakageError, match=re.escape("retrieved a-late published 2024-09-01")):
        evaluate.run(evaluate.Config(root=toy_root, llm=oracle_llm(), modes=("retrieval",)))
    assert not storage.exists(storage.join(toy_root, "eval", "leaderboard.parquet"))


def test_searches_run_in_ray_workers_not_in_the_driver(toy_root, monkeypatch):
    """The index's searches and their working memory grow with the corpus; they belong to the
    workers. A driver that searched would hit the patched method."""

    def in_the_driver(*args, **kwargs):
        raise AssertionError("the driver searched the index")

    monkeypatch.setattr(Corpus, "retrieve", in_the_driver)
    outcome = evaluate.run(evaluate.Config(root=toy_root, llm=oracle_llm(), modes=("retrieval",)))
    assert outcome.results and all(r["retrieved_ids"] for r in outcome.results if r["type"] != "open")


def test_gold_articles_are_never_retrieved_even_when_most_relevant(toy_root):
    corpus = Corpus.load(toy_root)
    item = {**toy_items()[0], "question": "Council approves harbour repair budget", "t_cut": utc(2024, 9, 30)}

    for retriever in ("bm25", "dense", "hybrid"):
        ids = corpus.retrieve(item, retriever, RetrievalConfig(k=20)).ids
        assert "a-budget" not in ids and "a-vote" in ids and "a-undated" not in ids


def test_plan_renders_every_stage_and_writes_nothing(toy_root, capsys):
    outcome = evaluate.run(
        evaluate.Config(root=toy_root, llm=oracle_llm(), plan=True, modes=("closed_book",))
    )
    printed = capsys.readouterr().out
    for stage in ("forecast_choice", "forecast_order", "forecast_events", "forecast_answer"):
        assert stage in printed
    assert outcome.results == [] and not storage.exists(storage.join(toy_root, "eval", "leaderboard.parquet"))
    assert not storage.exists(storage.join(toy_root, "eval", "_runs"))


def test_command_line_errors_are_one_line_before_any_work(toy_root, tmp_path, capsys):
    import pipelines.evaluate.run as evaluation
    from pipelines.options import main

    def cli(*argv: str) -> str:
        with pytest.raises(SystemExit) as exc:
            main("pipelines.evaluate", evaluation.Config, evaluation.run, None, ["--root", *argv])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("python -m pipelines.evaluate: error: ")
        return err

    assert cli(toy_root, "--limit", "-3").endswith("argument --limit: must be at least 1, got -3")
    assert cli(toy_root, "--limit", "0").endswith("argument --limit: must be at least 1, got 0")
    assert "'bogus' is not one of closed_book, retrieval, gold_context" in cli(toy_root, "--modes", "bogus")
    assert cli(toy_root, "--backend", "http").endswith("--model is required with the http backend")
    assert "no such input file: " in cli(toy_root, "--questions", str(tmp_path / "missing.jsonl"))
    assert "does not exist" in cli(str(tmp_path / "typo_root"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "missing corpus/articles under" in cli(str(empty), "--modes", "retrieval")
