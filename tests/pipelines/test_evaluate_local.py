"""The harness end to end on the embedded local model: ForecastBench questions and items of every
type, through real stages (forecasters and the LRAE / answer judges); a leaderboard, a drift table
and plot come out, and every item is either scored or rejected with a reason."""

from __future__ import annotations

import pytest

from pipelines.evaluate import run as evaluate
from pipelines.llm.config import LLMConfig
from tests.fixtures.evaluate.data import write_toy_benchmark
from udfs import storage

pytestmark = [pytest.mark.llm, pytest.mark.ray]


def test_local_model_end_to_end(toy_index, copy_root, shared_data):
    root = copy_root(toy_index)
    write_toy_benchmark(root)
    questions = shared_data / "questions"
    config = evaluate.Config(
        root=root,
        llm=LLMConfig(batch_size=8, max_new_tokens=40),
        forecastbench=(
            (
                str(questions / "forecastbench_2024-07-21-human.json"),
                str(questions / "forecastbench_2024-07-21_resolution_set.json"),
            ),
        ),
        limit=1,  # one item per (benchmark, task): every type and path, half the decoding
        modes=("closed_book", "retrieval"),
        answer_formats=("choice", "text"),
        k=2,
        doc_words=40,
        background_words=60,
    )
    outcome = evaluate.run(config)
    assert outcome.items == 7  # toy tf, mc, binary, order, stf, aqa + ForecastBench
    choice_type = 4  # tf, mc, binary, ForecastBench: also answered as free text
    # two modes; the order item also retrieves one by one; no gold_context, nothing rejected
    assert len(outcome.results) == 2 * (outcome.items + choice_type) + 1
    assert all(s.reconciles for s in outcome.summaries), [
        s.name for s in outcome.summaries if not s.reconciles
    ]
    for row in outcome.results:
        assert row["refusal"] == (row["refusal_reason"] is not None)
        if row["type"] in ("yesno", "mc", "binary_prob") and not row["refusal"]:
            assert abs(sum(row["probs"]) - 1) < 1e-9
            assert row["answer_format"] != "choice" or 0 < row["option_mass"] <= 1
        if row["mode"] == "retrieval":
            assert all(d < row["t_cut"] for d in row["retrieved_dates"])
    text = [r for r in outcome.results if r["answer_format"] == "text"]
    assert len(text) == 2 * choice_type
    for row in text:  # free text: an answer in a paper's form, or a refusal that says why
        assert row["refusal"] or (row["probs"] is not None and sorted(row["probs"])[-1] > 0)
        if row["refusal"]:
            assert row["refusal_reason"].startswith(("parse: refusal", "parse: empty answer")), row[
                "refusal_reason"
            ]
    stf = [r for r in outcome.results if r["task"] == "stf"]
    assert all(r["open_f1"] is not None and 0 <= r["open_f1"] <= 1 for r in stf)
    board = outcome.reports["leaderboard"].to_pylist()
    models = {r["model"] for r in board}
    assert models == {"gemma-3-270m", "baseline:uniform", "baseline:majority", "baseline:by_date"}
    fb = [r for r in board if r["benchmark"] == "forecastbench" and r["model"] == "gemma-3-270m"]
    assert {r["setting"] for r in fb} == {
        f"{mode}.{fmt}" for mode in ("closed_book", "retrieval-bm25") for fmt in ("choice", "text")
    }
    assert all(r["brier_tag"] == "binary_x100" and 0 <= r["brier"] <= 100 for r in fb)
    md = storage.read_bytes(storage.join(root, "eval", "leaderboard.md")).decode()
    assert "| forecastbench | binary | test | gemma-3-270m | closed_book.choice |" in md
    assert storage.read_bytes(storage.join(root, "eval", "drift.png"))[:4] == b"\x89PNG"
    assert storage.read_table(storage.join(root, "eval", "drift.parquet")).num_rows > 0
