"""The registry (``pipelines.builders``): every builder's declaration is consistent with itself,
and the command line demo.sh reads lists the builders and their demo flags."""

from __future__ import annotations

import pytest

from pipelines import builders

REGISTERED = builders.registry()


def test_the_four_builders_are_registered_in_the_demo_order():
    assert list(REGISTERED) == ["tcelongbench", "openforecast", "prophet", "daily_oracle"]
    assert builders.modules() == {name: f"pipelines.{name}" for name in REGISTERED}


@pytest.mark.parametrize("builder", REGISTERED.values(), ids=list(REGISTERED))
def test_a_declaration_names_only_its_own_tables_and_options(builder):
    assert "rejected" in builder.tables and "eval_items" not in builder.tables
    assert builder.steps and all(callable(step) for step in builder.steps)
    if builder.event is not None:  # the audit reads the event key from tables the builder writes
        assert set(builder.event.tables) <= set(builder.tables)
    partitioned = {cols for cols in builder.tables.values() if cols}
    assert len(partitioned) <= 1  # one partitioning per builder (a run replaces whole tables or days)
    flags = [a for a in builder.demo.argv("/data") if a.startswith("--")]
    assert "--root" not in flags and all("{" not in a for a in builder.demo.argv("/data"))


def test_the_demo_flags_name_the_sample_data_directory():
    argv = REGISTERED["prophet"].demo.argv("/samples")
    assert "/samples/questions/forecastbench_2024-07-21-human.json" in argv


def test_the_command_line_lists_the_builders(capsys):
    builders.main(["names"])
    assert capsys.readouterr().out.split() == list(REGISTERED)
    with pytest.raises(SystemExit):
        builders.main(["demo", "no_such_builder", "out", "/data"])


def test_a_builder_is_ready_once_every_table_it_reads_and_the_index_it_searches_are_written(capsys):
    corpus = ["corpus/articles", "corpus/wiki_pages", "corpus/wcep_events"]
    assert builders.ready([]) == []
    assert builders.ready(["corpus/articles"]) == ["daily_oracle"]
    # OpenForecast reads the articles when they exist (optional): it waits for them too
    assert "openforecast" not in builders.ready(["corpus/wiki_pages", "corpus/wcep_events"])
    assert builders.ready(corpus) == ["openforecast", "daily_oracle"]
    assert builders.ready([*corpus, "index"]) == list(REGISTERED)
    builders.main(["names", "--ready", "corpus/articles,index"])
    assert capsys.readouterr().out.split() == ["tcelongbench", "prophet", "daily_oracle"]


def test_the_evaluation_and_the_audit_read_the_declarations():
    assert builders.retrieval()["daily_oracle"].strict and builders.retrieval()["prophet"].summaries
    assert "openforecast" not in builders.retrieval()  # the evaluation's defaults
    assert builders.event_key("tcelongbench").key_column == "tce_id"
    assert builders.event_key("forecastqa") is None  # imported, not built: no split check
