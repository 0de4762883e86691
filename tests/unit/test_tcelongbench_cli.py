"""The TCELongBench command line and its input checks: a misspelled root, a file given as the
root or a root without ``corpus/articles`` stops with one line (exit 2) before anything is
written; bad option values are usage errors; an existing empty articles table is a valid
(empty) build whose summary says so."""

from __future__ import annotations

import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import read_rejected
from pipelines.tcelongbench import Config, run
from pipelines.tcelongbench import __main__ as cli
from pipelines.tcelongbench.formation import Events
from udfs import storage
from udfs.schemas import ARTICLES

PROG = "python -m pipelines.tcelongbench"


def command(*argv: str):
    return cli.main("pipelines.tcelongbench", cli.Config, cli.run, cli.__doc__, list(argv))


def error_line(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        command(*argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith(f"{PROG}: error: ")
    return lines[-1]


def test_a_misspelled_root_stops_before_any_work(tmp_path, capsys):
    typo = tmp_path / "typo_dir"
    line = error_line(capsys, "--root", str(typo), "--plan")
    uri = storage.normalize_uri(str(typo))
    assert line == f"{PROG}: error: --root {uri} does not exist (a typo? run the corpus jobs first)"
    assert not typo.exists()


def test_a_file_as_root_stops_before_any_work(tmp_path, capsys):
    (tmp_path / "a_file.txt").write_text("not a corpus")
    line = error_line(capsys, "--root", str(tmp_path / "a_file.txt"))
    uri = storage.normalize_uri(str(tmp_path / "a_file.txt"))
    assert line == f"{PROG}: error: --root {uri} is a file, not a directory"
    assert [p.name for p in tmp_path.iterdir()] == ["a_file.txt"]


def test_a_root_without_articles_names_the_table(tmp_path, capsys):
    line = error_line(capsys, "--root", str(tmp_path))
    uri = storage.normalize_uri(str(tmp_path))
    assert line == f"{PROG}: error: missing corpus/articles under {uri}: run the corpus jobs (jobs/) first"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--limit", "-3"], "argument --limit: must be at least 1, got -3"),
        (["--max-article-words", "0"], "argument --max-article-words: must be at least 1, got 0"),
        (["--plausible-mode", "loose"], "argument --plausible-mode: 'loose' is not one of brief, paper"),
        (["--min-span-days", "40"], "--min-span-days exceeds --max-span-days"),
        (["--verify-min-pass", "4"], "--verify-min-pass must lie in 1..3"),
        (["--max-new-tokens", "0"], "argument --max-new-tokens: must be at least 1, got 0"),
    ],
)
def test_bad_values_are_one_line_usage_errors(tmp_path, capsys, argv, message):
    assert error_line(capsys, "--root", str(tmp_path), *argv) == f"{PROG}: error: {message}"


def test_usage_names_the_module_and_the_shared_options(capsys):
    with pytest.raises(SystemExit):
        command("--help")
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {PROG} --root ROOT [options]")
    for flag in ("--force", "--plan", "--seed", "--limit", "--max-new-tokens", "--max-article-words"):
        assert flag in out
    for gone in ("--max-tces", "--max-article-chars", "--max-tokens "):
        assert gone not in out


def test_an_empty_articles_table_builds_an_empty_benchmark_and_says_so(tmp_path):
    root = str(tmp_path)
    storage.write_dataset(ARTICLES.schema.empty_table(), ARTICLES.uri(root))
    result = run(Config(root=root, llm=LLMConfig(backend="scripted", script={})))
    inputs = result.summaries[0]
    assert inputs.name == "tcelongbench/inputs" and inputs.notes == ["corpus/articles exists but is empty"]
    assert result.tables["tce"].num_rows == 0 and result.card["counts"]["eval_items"] == 0
    assert read_rejected(root, "tcelongbench").num_rows == 0


def test_prompts_show_the_first_words_of_an_article():
    events = Events([], [], {"a": {"text": "one  two\nthree four"}}, max_words=3)
    assert events.text("a") == "one two three"
    assert Events([], [], {"a": {"text": "one  two"}}, max_words=3).text("a") == "one  two"
