"""Leaderboard aggregation, baselines, "All" rows and drift tables on hand-made result rows;
item discovery and selection."""

import datetime as dt

import pyarrow as pa
import pytest

from pipelines.benchmarks import write_eval_items
from pipelines.evaluate.inputs import discover_benchmarks, load_items, select
from udfs import storage
from udfs.eval_items import EVAL_ITEM_SCHEMA, YES_NO
from udfs.evaluate.baselines import baseline_results, ordering_uniform
from udfs.evaluate.leaderboard import ALL_MACRO, ALL_MICRO, drift_tables, leaderboard

CUT = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def result(
    item_id, kind, correct, brier_sum=None, brier_binary=None, refusal=False, month=dt.date(2024, 1, 1), **kw
):
    row = {
        "item_id": item_id,
        "benchmark": "b",
        "task": kind,
        "split": "test",
        "type": kind,
        "model": "m",
        "setting": "closed_book.choice",
        "mode": "closed_book",
        "retriever": None,
        "answer_format": "choice",
        "forecasting": True,
        "correct": correct,
        "brier_sum": brier_sum,
        "brier_binary": brier_binary,
        "refusal": refusal,
        "tie": False,
        "month": month,
        "after_model_cutoff": None,
        "model_cutoff": None,
        "open_f1": None,
        "gold_index": kw.pop("gold_index", 0),
        "gold_value": kw.pop("gold_value", None),
        "n_choices": kw.pop("n_choices", 2),
        "gold_order": None,
        "pred_order": None,
    }
    return {**row, **kw}


def test_rows_refusals_answered_subset_and_all():
    rows = [
        result("y1", "yesno", 1.0, 0.08),
        result("y2", "yesno", 0.0, 0.5, refusal=True),
        result("m1", "mc", 1.0, 0.12, n_choices=4),
        result("m2", "mc", 0.0, 1.2, n_choices=4),
        result("m3", "mc", 1.0, 0.3, n_choices=4),
    ]
    board = {r["task"]: r for r in leaderboard(rows).to_pylist()}
    yn = board["yesno"]
    assert (yn["n"], yn["n_answered"], yn["refusal_rate"]) == (2, 1, 0.5)
    assert yn["accuracy"] == 0.5 and yn["accuracy_answered"] == 1.0
    assert (
        yn["brier"] == pytest.approx(0.29)
        and yn["brier_answered"] == pytest.approx(0.08)
        and yn["brier_tag"] == "sum"
    )
    assert yn["accuracy_ci_low"] <= 0.5 <= yn["accuracy_ci_high"]
    assert board[ALL_MICRO]["accuracy"] == pytest.approx((2 * 0.5 + 3 * 2 / 3) / 5)
    assert board[ALL_MACRO]["accuracy"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert board[ALL_MICRO]["brier"] == pytest.approx((0.08 + 0.5 + 0.12 + 1.2 + 0.3) / 5)


def test_binary_items_are_tagged_x100_and_mixed_tags_give_no_all_brier():
    rows = [
        result("p1", "binary_prob", 1.0, 0.08, 0.04, gold_value=1.0),
        result("p2", "binary_prob", 0.0, 0.98, 0.49, gold_value=0.0),
        result("y1", "yesno", 1.0, 0.08),
    ]
    board = {r["task"]: r for r in leaderboard(rows).to_pylist()}
    assert (
        board["binary_prob"]["brier"] == pytest.approx(26.5)
        and board["binary_prob"]["brier_tag"] == "binary_x100"
    )
    assert board[ALL_MICRO]["brier"] is None and board[ALL_MICRO]["accuracy"] == pytest.approx(2 / 3)


def test_baselines_from_gold_labels():
    rows = [result(f"y{i}", "yesno", None, gold_index=g) for i, g in enumerate([0, 0, 1])]
    rows += [result(f"p{i}", "binary_prob", None, gold_value=v) for i, v in enumerate([1.0, 0.0, 0.0, 0.0])]
    board = {(r["model"], r["task"]): r for r in leaderboard(baseline_results(rows)).to_pylist()}
    assert board[("baseline:uniform", "yesno")]["brier"] == pytest.approx(0.5)
    assert board[("baseline:uniform", "binary_prob")]["brier"] == pytest.approx(25.0)
    assert board[("baseline:majority", "yesno")]["accuracy"] == pytest.approx(2 / 3)
    assert board[("baseline:majority", "yesno")]["brier"] == pytest.approx(2 / 3)
    assert board[("baseline:majority", "binary_prob")]["accuracy"] == pytest.approx(0.75)  # always "no"
    assert board[("baseline:majority", "binary_prob")]["brier"] == pytest.approx(25.0)  # one miss × 100 / 4
    order = ordering_uniform(
        [{"benchmark": "b", "task": "order", "type": "ordering", "split": "test", "gold_order": [2, 0, 1]}]
    )
    assert order[0]["accuracy"] == pytest.approx(1 / 6) and order[0]["levenshtein"] == pytest.approx(10 / 6)


def test_drift_tables_skip_baselines_and_split_at_the_cutoff():
    rows = [
        result(f"y{n}", "yesno", c, 0.1, month=m, model_cutoff=dt.date(2024, 2, 15))
        for n, (c, m) in enumerate(
            [
                (1.0, dt.date(2023, 1, 1)),
                (0.0, dt.date(2023, 2, 1)),
                (1.0, dt.date(2024, 1, 1)),
                (1.0, dt.date(2024, 2, 1)),
            ]
        )
    ]
    rows.append(
        {
            **result("y0", "yesno", 1.0, 0.5),
            "model": "baseline:uniform",
            "mode": "baseline",
            "setting": "baseline",
        }
    )
    monthly, summary = drift_tables(rows)
    months = monthly.to_pylist()
    assert len(months) == 14 and {m["model"] for m in months} == {"m"}
    assert [m["after_model_cutoff"] for m in months][-2:] == [False, True]
    (s,) = summary.to_pylist()
    assert s["yoy_pre"] == pytest.approx(0.0) and s["yoy_post"] is None  # Feb 2023 accuracy 0: YoY undefined
    assert s["months"] == 4


def _item(item_id, **kw):
    return {
        "item_id": item_id,
        "benchmark": "new_builder",
        "task": "tf",
        "split": kw.pop("split", "test"),
        "type": "yesno",
        "question": "Will it?",
        "choices": YES_NO,
        "gold_index": 0,
        "t_cut": CUT,
        **kw,
    }


def test_a_new_builder_is_discovered_and_bad_rows_are_rejected(tmp_path):
    root = str(tmp_path)
    write_eval_items(root, "new_builder", [_item("a"), _item("b", split="dev")])
    bad = pa.Table.from_pylist([{**_item("c"), "benchmark": "raw", "gold_index": 5}], schema=EVAL_ITEM_SCHEMA)
    storage.write_dataset(bad, storage.join(root, "benchmarks", "raw", "eval_items"))
    assert discover_benchmarks(root) == ["new_builder", "raw"]
    items, summary = load_items(root, None, (), (), (), None)
    assert sorted(i["item_id"] for i in items) == ["a", "b"]
    assert (
        summary.rows_read == 3
        and summary.rejected == {"invalid_item: gold_index out of range": 1}
        and summary.reconciles
    )
    kept, selected = select(items, ("test",), None, 0)
    assert [i["item_id"] for i in kept] == ["a"] and selected.rejected == {"split_not_selected": 1}
    with pytest.raises(ValueError, match="no eval_items"):
        load_items(root, ("missing",), (), (), (), None)


def test_limit_takes_the_same_seeded_sample():
    items = [_item(f"q{i}") for i in range(10)]
    first, summary = select(items, None, 3, seed=1)
    again, _ = select(list(reversed(items)), None, 3, seed=1)
    assert [i["item_id"] for i in first] == [i["item_id"] for i in again]
    assert summary.rejected == {"over_limit": 7} and summary.reconciles


def test_splits_are_never_pooled_and_baselines_follow_them():
    """PROPHET's L1 and L2 are different populations: one row (and one "All" row) per split."""
    rows = [
        result("a", "yesno", 1.0, 0.0, split="L1"),
        result("b", "yesno", 1.0, 0.0, split="L1"),
        result("c", "yesno", 0.0, 2.0, split="L2", gold_index=1),
        result("d", "mc", 1.0, 0.0, split="L1", n_choices=4),
        result("e", "mc", 0.0, 2.0, split="L2", n_choices=4, gold_index=2),
    ]
    items = [{**r, "choices": ["w", "x", "y", "z"][: r["n_choices"]]} for r in rows]
    board = leaderboard(rows + baseline_results(items)).to_pylist()
    mine = {(r["task"], r["split"]): r for r in board if r["model"] == "m"}
    assert set(mine) == {(t, s) for t in ("yesno", "mc", ALL_MICRO, ALL_MACRO) for s in ("L1", "L2")}
    assert (mine[("yesno", "L1")]["n"], mine[("yesno", "L1")]["accuracy"]) == (2, 1.0)
    assert (mine[("yesno", "L2")]["n"], mine[("yesno", "L2")]["accuracy"]) == (1, 0.0)
    assert mine[(ALL_MICRO, "L1")]["n"] == 3 and mine[(ALL_MICRO, "L2")]["accuracy"] == 0.0
    majority = {(r["task"], r["split"]): r for r in board if r["model"] == "baseline:majority"}
    # L1's yes/no golds are both Yes, L2's only one is No: each split's own majority is right
    assert majority[("yesno", "L1")]["accuracy"] == 1.0 and majority[("yesno", "L2")]["accuracy"] == 1.0


def written(*args, **kw):
    """A result row as the harness writes it: with its item's cutoff."""
    return {**result(*args, **kw), "t_cut": CUT}


def test_runs_over_different_splits_keep_each_others_results(tmp_path):
    from pipelines.evaluate import report

    root = str(tmp_path)
    l1 = [written("a", "yesno", 1.0, 0.0, split="L1"), written("b", "yesno", 0.0, 2.0, split="L1")]
    report.write_results(root, "prophet", "m", l1)
    report.write_results(root, "prophet", "m", [written("c", "yesno", 1.0, 0.0, split="L2")])
    report.write_results(root, "prophet", "m", [written("d", "yesno", 1.0, 0.0, setting="closed_book.text")])
    found = {(r["item_id"], r["split"], r["setting"]) for r in report.read_all_results(root)}
    assert found == {
        ("a", "L1", "closed_book.choice"),
        ("b", "L1", "closed_book.choice"),
        ("c", "L2", "closed_book.choice"),
        ("d", "test", "closed_book.text"),
    }
    # a rerun of L1 replaces L1's results (here: one item fewer) and keeps L2's
    report.write_results(root, "prophet", "m", [written("a", "yesno", 0.0, 2.0, split="L1")])
    rows = {
        (r["item_id"], r["split"]): r["correct"]
        for r in report.read_all_results(root)
        if r["setting"] == "closed_book.choice"
    }
    assert rows == {("a", "L1"): 0.0, ("c", "L2"): 1.0}


def test_repeated_runs_give_mean_and_std_over_runs():
    """Two runs of two binary items: run 0 scores 1.0 and 0.0 correct, run 1 scores 1.0 and 1.0."""
    rows = [
        result("a", "yesno", 1.0, 0.0, run=0),
        result("b", "yesno", 0.0, 2.0, run=0),
        result("a", "yesno", 1.0, 0.0, run=1),
        result("b", "yesno", 1.0, 0.5, run=1),
    ]
    (row,) = [r for r in leaderboard(rows).to_pylist() if r["model"] == "m"]
    assert (row["n"], row["runs"]) == (4, 2)
    assert row["accuracy"] == pytest.approx(0.75) and row["accuracy_std"] == pytest.approx(0.3535533906)
    assert row["brier"] == pytest.approx(0.625) and row["brier_std"] == pytest.approx(0.5303300859)
    single = leaderboard(rows[:2]).to_pylist()[0]
    assert single["runs"] == 1 and single["accuracy_std"] is None and single["brier_std"] is None


def test_rejected_rows_of_other_splits_are_kept_like_results(tmp_path):
    from pipelines.evaluate import report

    root = str(tmp_path)

    def rejected(item_id, split, reason="no_context_scores", setting="retrieval-cil_high.text"):
        return {"item_id": item_id, "setting": setting, "split": split, "reason": reason}

    def stored():
        uri = report.eval_uri(root, "prophet", "m", "rejected")
        return sorted((r["item_id"], r["split"]) for r in storage.read_table(uri).to_pylist())

    report.write_rejected(root, "prophet", "m", [rejected("a", "L1")], {("retrieval-cil_high.text", "L1")})
    report.write_rejected(root, "prophet", "m", [rejected("b", "L2")], {("retrieval-cil_high.text", "L2")})
    assert stored() == [("a", "L1"), ("b", "L2")]
    # L1 runs again and its item is answered now: its rejection goes, L2's stays
    report.write_rejected(root, "prophet", "m", [], {("retrieval-cil_high.text", "L1")})
    assert stored() == [("b", "L2")]
