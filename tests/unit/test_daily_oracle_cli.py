"""The Daily Oracle command line: dates, ranges and options reach the Config; bad values and bad
roots end with one line and exit status 2 before any work."""

import datetime as dt

import pytest

from pipelines.daily_oracle import Config, run
from pipelines.options import main
from udfs.cli import parse

PROG = "python -m pipelines.daily_oracle"


def _config(argv: list[str]) -> Config:
    return parse(Config, argv, PROG)


def test_dates_and_options():
    cfg = _config(
        [
            *("--root", "out", "--from", "2022-09-15", "--to", "2022-09-17", "--date", "2022-09-20"),
            *("--publishers", "npr.org, abc7.com", "--random", "1", "--hot", "2", "--max-new-tokens", "48"),
            *("--max-input-tokens", "3072", "--article-words", "100", "--limit", "2", "--force"),
        ]
    )
    assert cfg.days == tuple(dt.date(2022, 9, d) for d in (15, 16, 17, 20))
    assert cfg.publishers == ("npr.org", "abc7.com") and (cfg.n_random, cfg.n_hot) == (1, 2)
    assert cfg.llm.max_new_tokens == 48 and cfg.llm.max_input_tokens == 3072 and cfg.llm.backend == "local"
    assert cfg.article_words == 100 and cfg.limit == 2 and cfg.force and not cfg.plan


def test_defaults_build_every_settled_day():
    cfg = _config(["--root", "out"])
    assert cfg.days == () and cfg.settle_days == 3 and cfg.publishers[-1] == "npr.org"
    assert cfg.llm.max_new_tokens is None and cfg.llm.max_input_tokens == 2048 and not cfg.force
    assert cfg.article_words is None and cfg.limit is None
    assert cfg == Config(root="out")  # the Python API has the same defaults


def test_repeated_dates_are_collected():
    cfg = _config(["--root", "out", "--date", "2022-09-18", "--date", "2022-09-15"])
    assert cfg.days == (dt.date(2022, 9, 15), dt.date(2022, 9, 18))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "2022-09-15"], "--from and --to go together"),
        (["--from", "2022-09-15", "--to", "2022-09-14"], "--to 2022-09-14 is before --from 2022-09-15"),
        (["--date", "yesterday"], "argument --date: invalid date (YYYY-MM-DD) value: 'yesterday'"),
        (["--limit", "-3"], "argument --limit: must be at least 1, got -3"),
        (["--random", "-1"], "argument --random: must be at least 0, got -1"),
        (["--article-words", "0"], "argument --article-words: must be at least 1, got 0"),
    ],
)
def test_bad_values_are_one_line_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(
            "pipelines.daily_oracle",
            Config,
            lambda cfg: pytest.fail("must not run"),
            None,
            ["--root", "out", *argv],
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"usage: {PROG} --root ROOT [options]")
    assert err[-1] == f"{PROG}: error: {message}"


def test_a_missing_root_or_a_file_as_root_is_one_line(tmp_path, capsys):
    a_file = tmp_path / "articles.parquet"
    a_file.write_text("not a root")
    empty = tmp_path / "empty"
    empty.mkdir()
    for root, message in (
        (
            tmp_path / "typo",
            f"--root file://{tmp_path}/typo does not exist (a typo? run the corpus jobs first)",
        ),
        (a_file, f"--root file://{a_file} is a file, not a directory"),
        (empty, f"missing corpus/articles under file://{empty}: run the corpus jobs (jobs/) first"),
    ):
        with pytest.raises(SystemExit) as exc:
            main("pipelines.daily_oracle", Config, run, None, ["--root", str(root), "--date", "2022-09-18"])
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip() == f"{PROG}: error: {message}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["articles.parquet", "empty"]  # nothing written
    assert list(empty.iterdir()) == []
