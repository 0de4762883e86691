"""Command lines generated from Config dataclasses (``udfs.cli``) and the root checks of
``udfs.layout``: types, ranges, choices, dates, pairs, presets, YAML files, one-line errors."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from pipelines.llm.config import LOCAL_MODEL, LLMConfig
from pipelines.options import RunOptions
from udfs.cli import InputError, nested, option, parse, run_cli
from udfs.layout import Layout
from udfs.schemas import ARTICLES, WIKI_PAGES


@dataclass(frozen=True)
class Inner:
    size: int = option(2, help="inner size", min=1)


@dataclass(frozen=True)
class Demo:
    root: str = option(help="root")
    inputs: tuple[str, ...] = option((), help="input files", positional=True)
    count: int = option(3, help="how many", min=0, max=10)
    ratio: float | None = option(None, help="a ratio", min=0.0, max=1.0)
    mode: str = option("fast", help="how", choices=("fast", "slow"))
    day: dt.date | None = option(None, help="a day")
    tags: tuple[str, ...] = option(("a",), help="tags")
    titles: tuple[str, ...] = option((), help="titles (may hold commas)", flag="--title", repeat=True)
    pair: tuple[str, str] | None = option(None, help="two files")
    pairs: tuple[tuple[str, str], ...] = option((), help="pairs of files")
    on: bool = option(False, help="a switch")
    inner: Inner = nested(Inner, title="inner", file_flag="--inner-config", help="inner YAML")
    hidden: int = 7
    start: dt.date | None = option(None, help="first day", flag="--from")
    end: dt.date | None = option(None, help="last day", flag="--to")

    def __post_init__(self) -> None:
        if (self.start is None) != (self.end is None):
            raise ValueError("--from and --to go together")


def run(argv: list[str], **kw) -> Demo:
    return parse(Demo, argv, "python -m demo", **kw)


def test_values_are_converted_by_type():
    d = run(
        [
            *("--root", "r", "x.warc", "y.warc", "--count", "4", "--ratio", "0.5", "--day", "2024-02-29"),
            *("--tags", "b,c", "--title", "A, B", "--title", "C", "--pair", "q.json", "r.json"),
            *("--pairs", "1", "2", "--pairs", "3", "4", "--on", "--size", "5", "--from", "2024-01-01"),
            *("--to", "2024-01-02"),
        ]
    )
    assert d.inputs == ("x.warc", "y.warc") and d.count == 4 and d.ratio == 0.5
    assert d.day == dt.date(2024, 2, 29) and d.tags == ("b", "c") and d.titles == ("A, B", "C")
    assert d.pair == ("q.json", "r.json") and d.pairs == (("1", "2"), ("3", "4")) and d.on
    assert d.inner == Inner(5) and d.hidden == 7 and d.start == dt.date(2024, 1, 1)


def test_defaults_come_from_the_dataclass():
    d = run(["--root", "r"])
    assert d == Demo(root="r")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--count", "-3"], "argument --count: must be at least 0, got -3"),
        (["--count", "11"], "argument --count: must be at most 10, got 11"),
        (["--mode", "bogus"], "argument --mode: 'bogus' is not one of fast, slow"),
        (["--day", "notadate"], "argument --day: invalid date (YYYY-MM-DD) value: 'notadate'"),
        (["--from", "2024-01-01"], "--from and --to go together"),
        (["--size", "0"], "argument --size: must be at least 1, got 0"),
        (["--count", "x"], "argument --count: invalid int value: 'x'"),
    ],
)
def test_bad_values_are_one_line_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        run(["--root", "r", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"python -m demo: error: {message}"
    assert err[0].startswith("usage: python -m demo --root ROOT [options]")


def test_a_missing_required_option_is_reported(capsys):
    with pytest.raises(SystemExit):
        run([])
    assert "the following arguments are required: --root" in capsys.readouterr().err


def test_presets_apply_before_explicit_flags():
    presets = {"small": ("small preset", {"count": 1, "mode": "slow", "inner": {"size": 9}})}
    d = run(["--root", "r", "--small", "--count", "2"], presets=presets)
    assert (d.count, d.mode, d.inner.size) == (2, "slow", 9)


def test_a_nested_yaml_file_is_read_then_overridden(tmp_path, capsys):
    good = tmp_path / "inner.yaml"
    good.write_text("size: 4\n")
    assert run(["--root", "r", "--inner-config", str(good)]).inner.size == 4
    assert run(["--root", "r", "--inner-config", str(good), "--size", "6"]).inner.size == 6
    bad = tmp_path / "bad.yaml"
    bad.write_text("sise: 4\n")
    with pytest.raises(SystemExit):
        run(["--root", "r", "--inner-config", str(bad)])
    assert "argument --inner-config: unknown keys ['sise']" in capsys.readouterr().err


def test_llm_options_need_a_model_for_served_backends(capsys):
    @dataclass(frozen=True)
    class Entry(RunOptions):
        pass

    entry = parse(Entry, ["--root", "r", "--max-new-tokens", "16", "--limit", "2"], "python -m x")
    assert entry.llm.model == LOCAL_MODEL and entry.llm.max_new_tokens == 16 and entry.limit == 2
    served = parse(Entry, ["--root", "r", "--backend", "http", "--model", "gemma-3-270m"], "python -m x")
    assert served.llm.backend == "http" and served.llm.model == "gemma-3-270m"
    for argv, message in (
        (["--backend", "http"], "--model is required with the http backend"),
        (["--limit", "-3"], "argument --limit: must be at least 1, got -3"),
        (["--limit", "0"], "argument --limit: must be at least 1, got 0"),
    ):
        with pytest.raises(SystemExit):
            parse(Entry, ["--root", "r", *argv], "python -m x")
        assert capsys.readouterr().err.strip().endswith(message)
    assert LLMConfig(backend="vllm", model="m").model == "m"
    with pytest.raises(ValueError, match="argument --limit: must be at least 1, got -3"):
        Entry(root="r", limit=-3)  # the Python API checks ranges too
    with pytest.raises(ValueError, match="argument --batch-size: must be at least 1"):
        LLMConfig(batch_size=0)


def test_vllm_placement_comes_from_the_llm_yaml_and_the_gpu_type_from_a_flag(tmp_path):
    @dataclass(frozen=True)
    class Entry(RunOptions):
        pass

    path = tmp_path / "llm.yaml"
    path.write_text(
        "backend: vllm\nmodel: m\naccelerator_type: H100\nschedule_timeout_s: 30\n"
        "placement_group_config: {bundles: [{CPU: 1}], strategy: STRICT_PACK}\n"
    )
    llm = parse(Entry, ["--root", "r", "--llm-config", str(path)], "python -m x").llm
    assert llm.placement_group_config == {"bundles": [{"CPU": 1}], "strategy": "STRICT_PACK"}
    assert (llm.accelerator_type, llm.schedule_timeout_s) == ("H100", 30.0)
    argv = ["--root", "r", "--llm-config", str(path), "--accelerator-type", "A100-80G"]
    assert parse(Entry, argv, "python -m x").llm.accelerator_type == "A100-80G"


def test_input_errors_end_the_run_with_one_line(tmp_path, capsys):
    def needs_articles(config: Demo) -> None:
        Layout(config.root).require(ARTICLES)

    with pytest.raises(SystemExit) as exc:
        run_cli(Demo, needs_articles, "python -m demo", None, ["--root", str(tmp_path / "typo")])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"python -m demo: error: --root file://{tmp_path}/typo does not exist (a typo? run the corpus jobs first)"
    )


def test_layout_checks_the_root_and_its_tables(tmp_path):
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    with pytest.raises(InputError, match="is a file, not a directory"):
        Layout(str(a_file)).check_root()
    layout = Layout(str(tmp_path))
    with pytest.raises(InputError, match="missing corpus/articles under"):
        layout.require(ARTICLES)
    with pytest.raises(InputError, match="none of corpus/articles, corpus/wiki_pages under"):
        layout.require(ARTICLES, WIKI_PAGES, any_of=True)
    (tmp_path / "corpus" / "wiki_pages").mkdir(parents=True)
    assert layout.require(ARTICLES, WIKI_PAGES, any_of=True) == [WIKI_PAGES]
    assert layout.benchmark("prophet", "rejected") == f"file://{tmp_path}/benchmarks/prophet/rejected"
    assert layout.stage("prophet", "joint") == f"file://{tmp_path}/prophet/joint"


def test_field_without_option_is_not_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        run(["--root", "r", "--hidden", "3"])
    assert "unrecognized arguments: --hidden" in capsys.readouterr().err


def test_unsupported_types_are_refused_when_the_parser_is_built():
    @dataclass(frozen=True)
    class Odd:
        table: dict = option(default_factory=dict, help="no")

    with pytest.raises(TypeError, match="unsupported type"):
        parse(Odd, [], "python -m odd")


@dataclass(frozen=True)
class Timed:
    cutoff: dt.datetime = option(help="a time")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01", dt.datetime(2024, 3, 1, tzinfo=dt.UTC)),
        ("2024-03-01T12:30:00.000001", dt.datetime(2024, 3, 1, 12, 30, 0, 1, tzinfo=dt.UTC)),
        ("2024-03-01T14:30:00+02:00", dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.UTC)),
    ],
)
def test_times_are_iso_and_utc_unless_an_offset_is_given(text, expected):
    parsed = parse(Timed, ["--cutoff", text], "python -m demo").cutoff
    assert parsed == expected and parsed.utcoffset() is not None


def test_a_bad_time_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as done:
        parse(Timed, ["--cutoff", "yesterday"], "python -m demo")
    assert done.value.code == 2 and "yesterday" in capsys.readouterr().err
