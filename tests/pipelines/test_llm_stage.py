"""The stage runner on the real embedded model through Ray Data: every request kind, parse
failures as rows, duplicates computed once, resumption after an interruption, S3 roots."""

import json
import math
import re

import pyarrow as pa
import pytest

import pipelines.llm.backends as backends
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs import storage
from udfs.llm_parsing import json_string_list
from udfs.report import RunSummary

pytestmark = [pytest.mark.llm, pytest.mark.ray]

LLM = LLMConfig(batch_size=4, shard_size=2)
CAPITAL = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)
COUNTRIES = pa.table({"country": ["France", "Japan", "France", "Kenya", "Japan", "Peru"]})


def _metrics(runner: StageRunner) -> dict:
    return runner.summaries[-1].metrics


def test_choice_probabilities_sum_to_one(ray_local, tmp_path):
    runner = StageRunner(str(tmp_path), "t", LLM)
    out = runner.run(
        LLMStage("is_country", "smoke.is_country"), pa.table({"name": ["Japan", "Lima", "Peru"]})
    )
    assert out.num_rows == 3
    for row in out.to_pylist():
        assert row["parse_ok"] and row["options"] == ["Yes", "No"]
        assert math.isclose(sum(row["option_probs"]), 1.0, rel_tol=1e-9)
        assert 0 < row["option_mass"] <= 1
        assert row["raw_text"] == row["options"][max(range(2), key=lambda j: row["option_probs"][j])]
        assert row["prompt_id"] == "smoke.is_country" and row["prompt_version"] == 1
        assert row["backend"] == "local" and row["input_tokens"] > 0


def test_generate_dedups_identical_prompts_and_keeps_input_columns(ray_local, tmp_path):
    runner = StageRunner(str(tmp_path), "t", LLM)
    out = runner.run(CAPITAL, COUNTRIES)
    m = _metrics(runner)
    assert out.num_rows == 6 and out.column("country").to_pylist() == COUNTRIES.column("country").to_pylist()
    assert m["requests_total"] == 6 and m["requests_unique"] == 4 and m["duplicates_collapsed"] == 2
    assert m["requests_computed"] == 4
    rows = out.to_pylist()
    assert rows[0]["raw_text"] == rows[2]["raw_text"] and rows[0]["request_key"] == rows[2]["request_key"]
    assert all(r["parse_ok"] and r["answer"] for r in rows)
    assert runner.summaries[-1].reconciles


def test_malformed_output_is_a_parse_error_row(ray_local, tmp_path):
    runner = StageRunner(str(tmp_path), "t", LLM)
    as_json = LLMStage(
        "capital_as_json",
        "smoke.capital",
        parser=lambda text: {"items": json_string_list(text)},
        parsed_schema=pa.schema([pa.field("items", pa.list_(pa.string()))]),
    )
    truncated = LLMStage("likelihood_cut", "smoke.likelihood", sampling={"max_tokens": 2})
    out = runner.run(as_json, COUNTRIES.slice(0, 2))
    assert out.column("parse_ok").to_pylist() == [False, False]
    assert all(e.startswith("parse: no JSON list") for e in out.column("parse_error").to_pylist())
    assert out.column("items").to_pylist() == [None, None]
    cut = runner.run(truncated, pa.table({"event": ["It snows in Cairo tomorrow."]}))
    assert cut.column("parse_ok").to_pylist() == [False] and cut.column("prob").to_pylist() == [None]
    summary: RunSummary = runner.summaries[-1]
    # two tokens cannot complete the declared form: the check against it fails before the parser
    assert summary.rejected == {"parse: output does not match the declared pattern": 1}
    assert summary.reconciles


def test_samples_get_distinct_seeds_and_are_reproducible(ray_local, tmp_path):
    stage = LLMStage(
        "sampled",
        "smoke.capital",
        parser=first_line,
        parsed_schema=ANSWER_SCHEMA,
        sampling={"temperature": 1.0},
        samples=3,
    )
    first = StageRunner(str(tmp_path / "a"), "t", LLM).run(stage, COUNTRIES.slice(0, 2))
    second = StageRunner(str(tmp_path / "b"), "t", LLM).run(stage, COUNTRIES.slice(0, 2))
    assert first.num_rows == 6 and first.column("sample_index").to_pylist() == [0, 1, 2, 0, 1, 2]
    assert len(set(first.column("seed").to_pylist())) == 6
    assert first.column("raw_text").to_pylist() == second.column("raw_text").to_pylist()


def test_interrupted_stage_reruns_only_missing_requests(ray_local, tmp_path, monkeypatch):
    """A stage killed after its first response shard was written: the rerun computes only the
    requests no shard holds. (Shards are written by Ray workers, so the kill is simulated by
    leaving the stage as a kill would: one shard, no output, no completion marker.)"""
    uninterrupted = StageRunner(str(tmp_path / "ref"), "t", LLM).run(CAPITAL, COUNTRIES)

    StageRunner(str(tmp_path / "run"), "t", LLM).run(CAPITAL, COUNTRIES)
    stage_dir = tmp_path / "run" / "t" / "capital"
    first, *rest = storage.list_files(str(stage_dir / "responses"), ".parquet")
    for shard in rest:
        storage.delete(shard)
    storage.delete(str(stage_dir / "output"))
    storage.delete(str(stage_dir / "_SUCCESS.json"))
    assert storage.read_table(first).num_rows == LLM.shard_size
    assert not storage.is_done(str(stage_dir))

    rerun = StageRunner(str(tmp_path / "run"), "t", LLM)
    out = rerun.run(CAPITAL, COUNTRIES)
    m = _metrics(rerun)
    assert m["requests_cached"] == LLM.shard_size and m["requests_computed"] == 4 - LLM.shard_size
    assert out.column("raw_text").to_pylist() == uninterrupted.column("raw_text").to_pylist()

    def no_engine(*args, **kwargs):
        raise AssertionError("a completed stage must not reach the engine")

    monkeypatch.setattr(backends, "apply_backend", no_engine)
    again = StageRunner(str(tmp_path / "run"), "t", LLM)
    again.run(CAPITAL, COUNTRIES)
    assert _metrics(again)["requests_computed"] == 0 and _metrics(again)["requests_cached"] == 4


def test_plan_counts_without_running(ray_local, tmp_path, monkeypatch):
    monkeypatch.setattr(
        backends, "apply_backend", lambda *a, **k: pytest.fail("plan must not run the engine")
    )
    runner = StageRunner(str(tmp_path), "t", LLM, plan_only=True)
    out = runner.run(CAPITAL, COUNTRIES)
    (plan,) = runner.plans
    assert (plan.rows, plan.requests_total, plan.requests_unique, plan.requests_to_compute) == (6, 6, 4, 4)
    assert plan.est_prompt_tokens > 4 * 10 and plan.max_output_tokens == 4 * 12
    assert not any(out.column("parse_ok").to_pylist())
    assert not storage.exists(str(tmp_path / "t" / "capital"))


@pytest.mark.s3
def test_stage_on_an_s3_root(ray_local, s3_root):
    runner = StageRunner(s3_root, "t", LLM)
    runner.run(LLMStage("is_country", "smoke.is_country"), pa.table({"name": ["Japan", "Tokyo"]}))
    uri = storage.join(s3_root, "t", "is_country")
    assert storage.is_done(uri)
    back = storage.read_table(storage.join(uri, "output"))
    assert back.num_rows == 2 and all(back.column("parse_ok").to_pylist())
    rerun = StageRunner(s3_root, "t", LLM)
    rerun.run(LLMStage("is_country", "smoke.is_country"), pa.table({"name": ["Japan", "Tokyo"]}))
    assert _metrics(rerun)["requests_computed"] == 0


def test_structured_choice_on_the_local_engine_answers_an_option(ray_local, tmp_path):
    stage = LLMStage("capital_choice", "smoke.capital", structured={"choice": ["Paris", "Lyon", "Tokyo"]})
    out = StageRunner(str(tmp_path), "t", LLM).run(stage, COUNTRIES.slice(0, 2))
    assert out.column("raw_text").to_pylist() == ["Paris", "Tokyo"]


def test_per_row_sampling_overrides(ray_local, tmp_path):
    rows = pa.table(
        {
            "country": ["France", "France", "Japan"],
            "overrides": ['{"temperature": 1.0, "seed": 7}', '{"temperature": 1.0, "seed": 8}', None],
        }
    )
    stage = LLMStage("per_row", "smoke.capital", sampling_column="overrides")
    out = StageRunner(str(tmp_path), "t", LLM).run(stage, rows).to_pylist()
    assert [r["temperature"] for r in out] == [1.0, 1.0, 0.0]
    assert out[0]["seed"] != out[1]["seed"] and out[0]["request_key"] != out[1]["request_key"]


def test_scripted_backend_replays_answers_per_prompt(ray_local, tmp_path):
    script = {
        "smoke.capital": lambda v: {"France": "Paris", "Japan": "Tokyo"}.get(v["country"], ""),
        "smoke.is_country": lambda v: "Yes" if v["name"] in {"Japan", "Peru"} else {"Yes": 0.2, "No": 0.8},
    }
    llm = LLMConfig(backend="scripted", script=script)
    runner = StageRunner(str(tmp_path), "t", llm)
    caps = runner.run(CAPITAL, pa.table({"country": ["France", "Japan", "Atlantis"]}))
    assert caps.column("answer").to_pylist() == ["Paris", "Tokyo", None]
    assert caps.column("parse_error").to_pylist()[2] == "parse: output does not match the declared pattern"
    labels = runner.run(LLMStage("is_country", "smoke.is_country"), pa.table({"name": ["Japan", "Lima"]}))
    probs = labels.column("option_probs").to_pylist()
    assert probs[0] == pytest.approx([0.9, 0.1]) and probs[1] == pytest.approx([0.2, 0.8])
    missing = runner.run(LLMStage("likelihood", "smoke.likelihood"), pa.table({"event": ["x"]}))
    assert missing.column("parse_error").to_pylist() == ["engine: no script for prompt smoke.likelihood"]


def test_engine_errors_are_retried_on_the_next_run(ray_local, tmp_path):
    """An engine error is an output row with its reason, but not a cached answer: a rerun sends
    exactly the failed requests again and keeps the answered ones."""
    is_country = LLMStage("is_country", "smoke.is_country")
    names = pa.table({"name": ["Japan", "Lima"]})
    root = str(tmp_path)
    outage = LLMConfig(backend="scripted", script={"smoke.capital": lambda v: "Paris"})
    failed = StageRunner(root, "t", outage).run(is_country, names)
    assert failed.column("parse_error").to_pylist() == ["engine: no script for prompt smoke.is_country"] * 2

    answered = {"smoke.is_country": lambda v: "Yes" if v["name"] == "Japan" else "No"}
    recovered = StageRunner(root, "t", LLMConfig(backend="scripted", script=answered))
    out = recovered.run(is_country, names)
    assert _metrics(recovered)["requests_computed"] == 2 and _metrics(recovered)["requests_cached"] == 0
    assert out.column("raw_text").to_pylist() == ["Yes", "No"] and all(out.column("parse_ok").to_pylist())

    again = StageRunner(root, "t", outage)
    again.run(is_country, names)
    assert _metrics(again)["requests_computed"] == 0 and _metrics(again)["requests_cached"] == 2


def test_json_and_regex_outputs_are_enforced_on_the_local_engine(ray_local, tmp_path):
    """The embedded base model answers in the declared form whatever it would have said: the
    engine masks every token the grammar forbids (xgrammar), and the runner checks the text."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24}},
        "required": ["city"],
        "additionalProperties": False,
    }
    runner = StageRunner(str(tmp_path), "t", LLM)
    as_json = LLMStage(
        "capital_json", "smoke.capital", structured={"json": schema}, sampling={"max_tokens": 24}
    )
    out = runner.run(as_json, COUNTRIES.slice(0, 3)).to_pylist()
    assert all(r["parse_ok"] for r in out), [r["parse_error"] for r in out]
    assert all(isinstance(json.loads(r["raw_text"])["city"], str) for r in out)
    as_regex = LLMStage("capital_regex", "smoke.capital", structured={"regex": r" [A-Z][a-z]{1,15}"})
    out = runner.run(as_regex, COUNTRIES.slice(0, 3)).to_pylist()
    assert all(r["parse_ok"] and re.fullmatch(r" [A-Z][a-z]{1,15}", r["raw_text"]) for r in out)
