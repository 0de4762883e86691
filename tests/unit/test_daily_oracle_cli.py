"""The Daily Oracle command line: dates, ranges and options reach the Config."""

import datetime as dt
import importlib

import pytest

cli = importlib.import_module("pipelines.daily_oracle.__main__")


def _config(monkeypatch, argv):
    seen = []
    monkeypatch.setattr(cli, "run", seen.append)
    cli.main(argv)
    return seen[0]


def test_dates_and_options(monkeypatch):
    cfg = _config(
        monkeypatch,
        [
            "--root",
            "out",
            "--from",
            "2022-09-15",
            "--to",
            "2022-09-17",
            "--date",
            "2022-09-20",
            "--publishers",
            "npr.org, abc7.com",
            "--random",
            "1",
            "--hot",
            "2",
            "--max-tokens",
            "48",
            "--max-input-tokens",
            "3072",
            "--force",
        ],
    )
    assert cfg.dates == tuple(dt.date(2022, 9, d) for d in (15, 16, 17, 20))
    assert cfg.publishers == ("npr.org", "abc7.com") and (cfg.n_random, cfg.n_hot) == (1, 2)
    assert cfg.max_tokens == 48 and cfg.llm.max_input_tokens == 3072 and cfg.llm.backend == "local"
    assert cfg.force


def test_defaults_build_every_settled_day(monkeypatch):
    cfg = _config(monkeypatch, ["--root", "out"])
    assert cfg.dates == () and cfg.settle_days == 3 and cfg.publishers[-1] == "npr.org"
    assert cfg.max_tokens is None and cfg.llm.max_input_tokens == 2048 and not cfg.force


@pytest.mark.parametrize(
    "argv",
    [["--from", "2022-09-15"], ["--from", "2022-09-15", "--to", "2022-09-14"], ["--date", "yesterday"]],
)
def test_bad_ranges_are_refused(monkeypatch, argv):
    monkeypatch.setattr(cli, "run", lambda cfg: pytest.fail("must not run"))
    with pytest.raises(SystemExit):
        cli.main(["--root", "out", *argv])
