"""The builder kit around the stage runner, through the real Ray Data path with scripted answers:
torn response shards, ``force``, the ``max_new_tokens`` cap, parsing after the answer prefix,
plan-mode rows, empty inputs and the ledger's one rejected schema."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import REJECTED_SCHEMA, Ledger, read_rejected
from pipelines.llm.stage import LLMStage, StagePlan, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs import storage
from udfs.llm_parsing import ParseError

pytestmark = [pytest.mark.ray]

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Chad": "N'Djamena"}
COUNTRIES = pa.table({"country": ["France", "Japan", "Kenya", "Peru", "Chad", "Mali"]})
CAPITAL = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)


def scripted(answers: dict[str, str], **kw) -> LLMConfig:
    return LLMConfig(
        backend="scripted",
        script={"smoke.capital": lambda v: answers.get(v["country"], "")},
        shard_size=2,
        batch_size=2,
        **kw,
    )


def metrics(runner: StageRunner) -> dict:
    return runner.summaries[-1].metrics


def test_a_torn_response_shard_is_set_aside_and_only_its_requests_are_recomputed(ray_local, tmp_path):
    root = str(tmp_path)
    StageRunner(root, "t", scripted(CAPITALS)).run(CAPITAL, COUNTRIES)
    shards = storage.list_files(str(tmp_path / "t" / "capital" / "responses"), ".parquet")
    assert len(shards) == 3
    storage.write_bytes(shards[1], b"PAR1 torn in the middle of a write")

    again = StageRunner(root, "t", scripted(CAPITALS))
    out = again.run(CAPITAL, COUNTRIES)
    assert metrics(again)["requests_cached"] == 4 and metrics(again)["requests_computed"] == 2
    assert out.column("answer").to_pylist()[:5] == list(CAPITALS.values())
    assert storage.exists(shards[1] + ".corrupt") and not storage.exists(shards[1])


def test_force_sends_the_requests_again_and_the_new_answers_win(ray_local, tmp_path):
    root = str(tmp_path)
    StageRunner(root, "t", scripted(CAPITALS)).run(CAPITAL, COUNTRIES)
    changed = {k: v.upper() for k, v in CAPITALS.items()}
    forced = StageRunner(root, "t", scripted(changed), force=True)
    out = forced.run(CAPITAL, COUNTRIES.slice(0, 2))
    assert metrics(forced)["requests_cached"] == 0 and metrics(forced)["requests_computed"] == 2
    assert out.column("answer").to_pylist() == ["PARIS", "TOKYO"]

    plain = StageRunner(root, "t", scripted({}))  # no answer may be computed: everything is cached
    out = plain.run(CAPITAL, COUNTRIES.slice(0, 3))
    assert metrics(plain)["requests_computed"] == 0
    assert out.column("answer").to_pylist() == ["PARIS", "TOKYO", "Nairobi"]  # newest answer wins


def test_max_new_tokens_caps_generation_but_not_choices(ray_local, tmp_path):
    llm = scripted(CAPITALS, max_new_tokens=5).replace(
        script={"smoke.capital": lambda v: "Paris", "smoke.is_country": lambda v: "Yes"}
    )
    runner = StageRunner(str(tmp_path), "t", llm)
    gen = runner.run(CAPITAL, COUNTRIES.slice(0, 1))
    choice = runner.run(LLMStage("is_country", "smoke.is_country"), pa.table({"name": ["Japan"]}))
    assert gen.column("max_tokens").to_pylist() == [5]
    assert choice.column("max_tokens").to_pylist() != [5] and choice.column("parse_ok").to_pylist() == [True]
    wide = StageRunner(str(tmp_path), "u", scripted(CAPITALS, max_new_tokens=500)).run(
        CAPITAL, COUNTRIES.slice(0, 1)
    )
    assert wide.column("max_tokens").to_pylist() == [12]  # the prompt's own limit is lower


def test_parse_prefix_gives_the_parser_the_whole_answer_turn(ray_local, tmp_path):
    def needs_prefix(text: str) -> dict:
        if not text.startswith("Answer:"):
            raise ParseError("no prefix")
        return {"answer": text[len("Answer:") :].strip()}

    llm = scripted({"France": " Paris", "Japan": "Answer: Tokyo"})
    stage = LLMStage(
        "p", "smoke.capital", parser=needs_prefix, parsed_schema=ANSWER_SCHEMA, parse_prefix=True
    )
    out = StageRunner(str(tmp_path), "t", llm).run(stage, COUNTRIES.slice(0, 2))
    assert out.column("answer").to_pylist() == ["Paris", "Tokyo"]  # a repeated prefix is read once


def test_plan_rows_are_not_run_until_answered(ray_local, tmp_path):
    root = str(tmp_path)
    plan = StageRunner(root, "t", scripted(CAPITALS), plan_only=True)
    out = plan.run(CAPITAL, COUNTRIES)
    assert out.column("not_run").to_pylist() == [True] * 6
    assert plan.summaries[-1].rejected == {"not_run": 6} and plan.summaries[-1].reconciles
    assert "capital" in StagePlan.table(plan.plans)
    StageRunner(root, "t", scripted(CAPITALS)).run(CAPITAL, COUNTRIES.slice(0, 2))
    out = StageRunner(root, "t", scripted(CAPITALS), plan_only=True).run(CAPITAL, COUNTRIES)
    assert out.column("not_run").to_pylist() == [False, False, True, True, True, True]


def test_an_empty_input_needs_no_placeholder_column(ray_local, tmp_path):
    runner = StageRunner(str(tmp_path), "t", scripted(CAPITALS))
    out = runner.run(CAPITAL, pa.Table.from_pylist([]))
    assert out.num_rows == 0 and {"parse_ok", "not_run", "answer"} <= set(out.column_names)


def test_the_ledger_records_failures_and_drops_in_the_one_rejected_schema(ray_local, tmp_path):
    root = str(tmp_path)
    runner = StageRunner(root, "demo_builder", scripted(CAPITALS))
    ledger = Ledger(runner)
    out = ledger.run(CAPITAL, COUNTRIES.to_pylist(), unit="country", id_column="country")
    assert out.num_rows == 6 and pc.sum(out.column("parse_ok")).as_py() == 5
    step = ledger.step("capital_check")
    for row in out.filter(out.column("parse_ok")).to_pylist():
        if row["answer"].startswith("N"):
            ledger.drop(step, "starts_with_n", unit="country", item_id=row["country"], detail=row["answer"])
        else:
            ledger.keep(step)
    ledger.close(step)
    ledger.check()
    written = ledger.write_rejected()
    back_table = read_rejected(root, "demo_builder")
    assert back_table.schema == REJECTED_SCHEMA and back_table.num_rows == written == 3
    back = back_table.to_pylist()
    by_item = {r["item_id"]: r for r in back}
    assert by_item["Mali"]["stage"] == "capital" and by_item["Mali"]["reason"] == "parse_error"
    # an empty answer does not have the declared form of smoke.capital
    assert by_item["Mali"]["detail"] == "parse: output does not match the declared pattern"
    assert by_item["Mali"]["not_run"] is False
    assert {by_item["Kenya"]["reason"], by_item["Chad"]["reason"]} == {"starts_with_n"}
    assert by_item["Chad"]["stage"] == "capital_check"
    assert [s.name for s in ledger.summaries] == ["demo_builder/capital", "demo_builder/capital_check"]


def test_a_declared_output_is_checked_before_the_parser_and_may_differ_per_row(ray_local, tmp_path):
    rows = pa.table(
        {
            "country": ["France", "Japan", "Kenya"],
            "form": ['{"choice": ["Paris", "Lyon"]}', '{"regex": " ?[A-Z][a-z]+"}', None],
        }
    )
    answers = {"France": "Paris", "Japan": "tokyo!", "Kenya": "Nairobi"}
    stage = LLMStage(
        "declared",
        "smoke.capital",
        parser=first_line,
        parsed_schema=ANSWER_SCHEMA,
        structured={"regex": "N[a-z]+"},
        structured_column="form",
    )
    out = StageRunner(str(tmp_path), "t", scripted(answers)).run(stage, rows).to_pylist()
    assert [r["parse_ok"] for r in out] == [True, False, True]
    assert out[1]["parse_error"] == "parse: output does not match the declared pattern"
