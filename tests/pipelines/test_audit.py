"""``python -m pipelines.audit`` end to end on a small real root: the toy articles and items of
the evaluation tests, a TCELongBench-shaped benchmark with its native ``qa_detail`` table and
stored results; each kind of violation planted one at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipelines.audit.__main__ import main
from pipelines.benchmarks import write_benchmark_table, write_eval_items
from pipelines.evaluate.report import write_results
from tests.fixtures.evaluate.data import toy_items, utc, write_articles, write_toy_benchmark
from udfs import audit, storage
from udfs.eval_items import EVAL_ITEM_SCHEMA

REPO = Path(__file__).resolve().parents[2]
TCE_ITEMS = [  # (qa_id, tce_id, split)
    ("qa-1", "tce-port", "train"),
    ("qa-2", "tce-port", "train"),
    ("qa-3", "tce-council", "test"),
]


def tce_items() -> list[dict[str, Any]]:
    """MC items whose context is their TCE's earlier articles (cutoff after them)."""
    return [
        {
            "item_id": qa,
            "benchmark": "tcelongbench",
            "task": "detail",
            "split": split,
            "type": "mc",
            "question": f"What happened at the Varna river port ({qa})?",
            "choices": ["The quay was damaged", "The port was sold", "A bridge collapsed", "Nothing"],
            "gold_index": 0,
            "t_cut": utc(2024, 2, 1),
            "context_article_ids": ["a-floods", "a-quay"],
            "source_id": qa,
        }
        for qa, _, split in TCE_ITEMS
    ]


def write_qa_detail(root: str, rows: list[tuple[str, str, str]]) -> None:
    table = pa.table({k: [r[i] for r in rows] for i, k in enumerate(("qa_id", "tce_id", "split"))})
    write_benchmark_table(root, "tcelongbench", "qa_detail", table, ("split",))


def result(item_id: str, ids: list[str], dates: list, mode: str = "retrieval") -> dict[str, Any]:
    item = {i["item_id"]: i for i in toy_items()}[item_id]
    return {
        **{k: item.get(k) for k in ("item_id", "benchmark", "task", "split", "type", "t_cut")},
        "model": "oracle",
        "setting": "gold_context.choice" if mode == "gold_context" else "retrieval-bm25.choice",
        "mode": mode,
        "forecasting": mode != "gold_context",
        "retrieved_ids": ids,
        "retrieved_dates": dates,
        "refusal": False,
    }


CLEAN_RESULTS = [
    result(
        "tf-1",
        ["a-floods", "a-quay#0", "a-vote#1"],
        [utc(2024, 1, 10, 9), utc(2024, 1, 25, 12), utc(2024, 2, 5, 8)],
    ),
    result("tf-1", ["a-budget"], [utc(2024, 3, 12, 15)], mode="gold_context"),  # after the cut: exempt
    result("mc-1", ["a-ferry"], [utc(2024, 3, 20, 7)]),
]


def write_results_rows(root: str, rows: list[dict[str, Any]]) -> None:
    write_results(root, "toy", "oracle", rows)


@pytest.fixture
def root(tmp_path) -> str:
    """A clean root: articles, the toy benchmark (no event key known), a TCELongBench-shaped one,
    stored results with a gold-context row and a benchmark without items."""
    root = str(tmp_path / "root")
    write_articles(root)
    write_toy_benchmark(root)
    write_eval_items(root, "tcelongbench", tce_items())
    write_qa_detail(root, TCE_ITEMS)
    write_results_rows(root, CLEAN_RESULTS)
    write_benchmark_table(root, "openforecast", "ce", pa.table({"ce_id": ["ce-1"]}))  # no items yet
    return root


def run_audit(root: str, capsys) -> tuple[int, dict[str, Any], str]:
    code = main(["--root", root])
    out = capsys.readouterr().out
    return code, json.loads(storage.read_bytes(storage.join(root, "eval", "audit.json"))), out


def test_a_clean_root_passes_and_every_check_looked_at_something(root, capsys):
    code, report, out = run_audit(root, capsys)
    assert code == 0 and report["violations"] == 0
    kinds = {b: r["kinds"] for b, r in report["benchmarks"].items()}
    for kind in audit.KINDS:
        assert max(k[kind]["checked"] or 0 for k in kinds.values()) > 0, kind
    assert kinds["tcelongbench"]["split_overlap"]["checked"] == 2  # two TCEs
    assert kinds["toy"]["split_overlap"] == {"checked": None, "skipped": True}
    assert kinds["toy"]["after_cutoff"]["checked"] == 3 + 1 + 3  # bin-1's context, mc-1, tf-1
    notes = report["benchmarks"]["toy"]["notes"]
    assert any("split check skipped" in n for n in notes)
    assert any("1 gold_context results" in n for n in notes)
    assert report["benchmarks"]["openforecast"]["notes"] == [
        "no eval_items and no stored results: nothing to check"
    ]
    assert "audit total: 0 violations in 3 benchmarks" in out


def _rewrite_toy(root: str, item_id: str, **changes: Any) -> None:
    write_eval_items(root, "toy", [{**i, **changes} if i["item_id"] == item_id else i for i in toy_items()])


def plant_after_cutoff_in_items(root: str) -> str:
    _rewrite_toy(root, "bin-1", context_article_ids=["a-floods", "a-quay", "a-budget", "a-reopen"])
    return "bin-1"


def plant_after_cutoff_in_results(root: str) -> str:
    write_results_rows(root, [*CLEAN_RESULTS, result("tf-2", ["a-late"], [utc(2024, 9, 1, 9)])])
    return "tf-2 (oracle, retrieval-bm25.choice)"


def plant_date_mismatch(root: str) -> str:
    write_results_rows(root, [*CLEAN_RESULTS, result("tf-2", ["a-floods"], [utc(2024, 1, 11)])])
    return "tf-2 (oracle, retrieval-bm25.choice)"


def plant_gold_in_context(root: str) -> str:
    _rewrite_toy(root, "mc-1", gold_article_ids=["a-strike", "a-ferry"])
    return "mc-1 (oracle, retrieval-bm25.choice)"


def plant_undated(root: str) -> str:
    write_results_rows(root, [*CLEAN_RESULTS, result("tf-2", ["a-undated"], [None])])
    return "tf-2 (oracle, retrieval-bm25.choice)"


def plant_missing(root: str) -> str:
    write_results_rows(root, [*CLEAN_RESULTS, result("tf-2", ["a-nowhere#2"], [utc(2024, 1, 1)])])
    return "tf-2 (oracle, retrieval-bm25.choice)"


def plant_split_overlap(root: str) -> str:
    write_qa_detail(
        root, [("qa-1", "tce-port", "train"), ("qa-2", "tce-port", "train"), ("qa-3", "tce-port", "test")]
    )
    return "tce-port"


def plant_answer_in_question(root: str) -> str:
    _rewrite_toy(root, "mc-2", question="Will a river festival draw crowds to the Varna quay?")
    return "mc-2"


def plant_missing_t_cut(root: str) -> str:
    """The item schema forbids a null t_cut, so the table is written past the validation."""
    items = [{**i, "t_cut": None} if i["item_id"] == "bin-2" else i for i in toy_items()]
    schema = EVAL_ITEM_SCHEMA.set(
        EVAL_ITEM_SCHEMA.get_field_index("t_cut"), EVAL_ITEM_SCHEMA.field("t_cut").with_nullable(True)
    )
    table = pa.Table.from_pylist([{f.name: i.get(f.name) for f in schema} for i in items], schema=schema)
    write_benchmark_table(root, "toy", "eval_items", table, ("split",))
    return "bin-2"


PLANTS = {  # kind → (plant, benchmark)
    "after_cutoff": [(plant_after_cutoff_in_items, "toy"), (plant_after_cutoff_in_results, "toy")],
    "date_mismatch": [(plant_date_mismatch, "toy")],
    "gold_in_context": [(plant_gold_in_context, "toy")],
    "undated": [(plant_undated, "toy")],
    "missing": [(plant_missing, "toy")],
    "split_overlap": [(plant_split_overlap, "tcelongbench")],
    "answer_in_question": [(plant_answer_in_question, "toy")],
    "missing_t_cut": [(plant_missing_t_cut, "toy")],
}
CASES = [(kind, plant, bench) for kind, plants in PLANTS.items() for plant, bench in plants]


def test_every_kind_has_a_planted_case():
    assert set(PLANTS) == set(audit.KINDS)


@pytest.mark.parametrize(("kind", "plant", "benchmark"), CASES, ids=[c[1].__name__ for c in CASES])
def test_a_planted_violation_is_reported(root, capsys, kind, plant, benchmark):
    example = plant(root)
    code, report, out = run_audit(root, capsys)
    assert code == 1 and report["violations"] == 1
    found = report["benchmarks"][benchmark]["kinds"][kind]
    assert found["violations"] == 1 and found["examples"][0]["id"] == example
    section = next(part for part in out.split("\n\n") if part.startswith(f"{benchmark}:"))
    row = next(line for line in section.splitlines() if line.startswith(audit.KINDS[kind]))
    assert row.split()[-1] == example.split()[-1]
    assert "audit total: 1 violations" in out


def test_the_process_exit_status(root):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "pipelines.audit", "--root", root]
    assert subprocess.run(command, env=env, cwd=REPO, capture_output=True).returncode == 0
    plant_undated(root)
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 1 and "audit total: 1 violations" in done.stdout


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_unusable_roots_are_one_line_errors(tmp_path, capsys, where):
    root = tmp_path / "root"
    if where == "empty":
        root.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["--root", str(root)])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert ("does not exist" if where == "missing" else "no benchmarks under") in err


@pytest.mark.s3
def test_an_s3_root(root, s3_root):
    storage.upload_tree(root, s3_root)
    assert main(["--root", s3_root]) == 0
    assert json.loads(storage.read_bytes(f"{s3_root}/eval/audit.json"))["violations"] == 0
