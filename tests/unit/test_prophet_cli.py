"""The command line of ``python -m pipelines.prophet``: bad roots, a missing article index and
bad limits are one-line errors (exit 2) before any work; ``--question-ids`` then ``--limit``
keep questions in file order."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

import pipelines.prophet.__main__ as entry
from pipelines.options import main
from pipelines.prophet.build import run
from pipelines.prophet.config import Config
from pipelines.prophet.questions import load_questions
from udfs import storage
from udfs.cli import InputError
from udfs.schemas import ARTICLES

PROG = "python -m pipelines.prophet"


def write_questions(path: Path, ids: list[str]) -> str:
    rows = [
        {"id": i, "question": f"Will {i} happen?", "resolution_date": "2024-07-28", "answer": n % 2}
        for n, i in enumerate(ids)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def cli(argv: list[str], capsys) -> tuple[int, list[str]]:
    """Run the entry point in-process; its exit status and its stderr lines."""
    with pytest.raises(SystemExit) as exc:
        main("pipelines.prophet", Config, run, entry.__doc__, argv)
    return exc.value.code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_bad_root_is_one_line_before_any_work(kind, tmp_path, capsys):
    root = tmp_path / "typo_dir"
    if kind == "file":
        root.write_text("not a directory", encoding="utf-8")
    # the question file does not exist either: the root is checked first, before anything is read
    code, err = cli(["--root", str(root), "--questions", str(tmp_path / "none.jsonl"), "--plan"], capsys)
    expected = "does not exist (a typo? run the corpus jobs first)" if kind == "missing" else "is a file"
    assert code == 2 and len(err) == 1
    assert err[0].startswith(f"{PROG}: error: --root ") and expected in err[0]
    assert root.exists() == (kind == "file") and sorted(p.name for p in tmp_path.iterdir()) == (
        ["typo_dir"] if kind == "file" else []
    )


def test_a_root_without_articles_is_one_line(tmp_path, capsys):
    questions = write_questions(tmp_path / "q.jsonl", ["a"])
    (tmp_path / "root").mkdir()
    code, err = cli(["--root", str(tmp_path / "root"), "--questions", questions], capsys)
    assert code == 2 and err == [
        f"{PROG}: error: missing corpus/articles under file://{tmp_path}/root: run the corpus jobs (jobs/) first"
    ]
    assert list((tmp_path / "root").iterdir()) == []


def test_a_root_without_an_article_index_is_one_line(tmp_path, capsys):
    """Dated articles but no ``index/articles``: the run stops before any question is read or
    any LLM stage starts, and says which command builds the index."""
    root = tmp_path / "root"
    published = dt.datetime(2024, 7, 20, tzinfo=dt.UTC)
    row = {
        "article_id": "a1",
        "url": "https://news.example/a1",
        "canonical_url": "https://news.example/a1",
        "text": "Harbor workers went on strike.",
        "published_at": published,
        "published_date": published.date(),
        "n_chars": 30,
        "text_hash": "h",
        "extractor": "synthetic",
    }
    table = pa.Table.from_pylist([row], schema=ARTICLES.schema)
    storage.write_dataset(table, ARTICLES.uri(str(root)), ARTICLES.partition_cols, replace="all")
    questions = write_questions(tmp_path / "q.jsonl", ["a"])
    code, err = cli(["--root", str(root), "--questions", questions], capsys)
    assert code == 2 and err == [
        f"{PROG}: error: no article index at {root}: run python -m pipelines.index --root {root} first"
    ]
    assert not (root / "prophet").exists() and not (root / "benchmarks").exists()


@pytest.mark.parametrize("value", ["-3", "0"])
def test_a_limit_below_one_is_a_usage_error(value, tmp_path, capsys):
    code, err = cli(["--root", str(tmp_path), "--questions", "q.jsonl", "--limit", value], capsys)
    assert code == 2 and err[-1] == f"{PROG}: error: argument --limit: must be at least 1, got {value}"
    assert err[0].startswith(f"usage: {PROG} --root ROOT")


def test_question_ids_then_limit_keep_the_file_order(tmp_path):
    questions = write_questions(tmp_path / "q.jsonl", ["a", "b", "c", "d"])
    table, _ = load_questions(Config(root="r", questions=questions, question_ids=("d", "b", "c"), limit=2))
    assert table.column("question_id").to_pylist() == ["b", "c"]
    table, _ = load_questions(Config(root="r", questions=questions, limit=3))
    assert table.column("question_id").to_pylist() == ["a", "b", "c"]


def test_missing_question_files_and_unknown_ids_are_input_errors(tmp_path):
    with pytest.raises(InputError, match=r"no question file .*none\.jsonl"):
        load_questions(Config(root="r", questions=str(tmp_path / "none.jsonl")))
    questions = write_questions(tmp_path / "q.jsonl", ["a"])
    with pytest.raises(InputError, match=r"unknown question ids: \['z'\]"):
        load_questions(Config(root="r", questions=questions, question_ids=("a", "z")))
