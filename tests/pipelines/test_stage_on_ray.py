"""The stage runner's work happens in Ray Data: the driver neither renders a prompt nor loads the
tokenizer, and a stage split over many blocks still collapses duplicates across blocks and
returns its rows in input order."""

from __future__ import annotations

import pyarrow as pa
import pytest

import pipelines.llm.flow as flow
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import ANSWER_SCHEMA, first_line
from udfs.prompts import Prompt

pytestmark = [pytest.mark.ray]

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima"}
SCRIPT = {
    "smoke.capital": lambda v: CAPITALS.get(v["country"], ""),
    "smoke.is_country": lambda v: "Yes" if v["name"] in CAPITALS else "No",
}


def test_the_driver_renders_nothing_and_many_blocks_keep_input_order(ray_local, tmp_path, monkeypatch):
    def not_on_the_driver(*args, **kwargs):
        raise AssertionError("the driver must not render prompts or load the tokenizer")

    monkeypatch.setattr(Prompt, "render", not_on_the_driver)  # workers import the real class
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", not_on_the_driver)
    monkeypatch.setattr(flow, "INPUT_BLOCK_ROWS", 3)  # one block per 3 rows: the units are sorted
    monkeypatch.setattr(flow, "RENDER_BATCH", 2)
    countries = ["Peru", "France", "Japan", "Peru", "Kenya", "France", "Mali", "Japan", "Peru", "Kenya"]
    runner = StageRunner(str(tmp_path), "t", LLMConfig(backend="scripted", script=SCRIPT, shard_size=2))
    stage = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA, samples=2)
    out = runner.run(stage, pa.table({"country": countries, "n": list(range(10))}))
    assert out.column("n").to_pylist() == [n for n in range(10) for _ in range(2)]
    assert out.column("sample_index").to_pylist() == [0, 1] * 10
    assert out.column("answer").to_pylist() == [a for c in countries for a in [CAPITALS.get(c)] * 2]
    metrics = runner.summaries[-1].metrics
    assert metrics["requests_total"] == 20 and metrics["requests_unique"] == 5  # greedy: samples collapse
    assert metrics["requests_computed"] == 5 and runner.summaries[-1].reconciles
    again = runner.run(stage, pa.table({"country": countries, "n": list(range(10))}))  # from 3 shards
    assert again.column("answer").to_pylist() == out.column("answer").to_pylist()
    assert runner.summaries[-1].metrics["requests_cached"] == 5

    choice = runner.run(LLMStage("is_country", "smoke.is_country"), pa.table({"name": countries}))
    assert choice.column("raw_text").to_pylist() == ["Yes" if c in CAPITALS else "No" for c in countries]


def test_a_stage_killed_mid_run_keeps_its_written_shards_and_resumes_from_them(ray_local, tmp_path):
    """The engine dies on its second batch, once the first batch's shard is on disk: that shard
    stays, the stage is not marked done, and the rerun computes only the other requests."""
    responses = tmp_path / "t" / "capital" / "responses"

    def dies_after_the_first_shard(v: dict) -> str:
        import time

        if v["country"] in ("Kenya", "Peru"):  # the second batch (requests go sorted by prompt)
            deadline = time.time() + 120
            while not list(responses.glob("shard-*.parquet")) and time.time() < deadline:
                time.sleep(0.2)
            raise RuntimeError("engine killed")
        return CAPITALS[v["country"]]

    stage = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)
    rows = pa.table({"country": ["Peru", "France", "Kenya", "Japan"]})
    killed = LLMConfig(
        backend="scripted", script={"smoke.capital": dies_after_the_first_shard}, batch_size=2, shard_size=2
    )
    with pytest.raises(Exception, match="engine killed"):
        StageRunner(str(tmp_path), "t", killed).run(stage, rows)
    assert len(list(responses.glob("shard-*.parquet"))) == 1
    assert not (tmp_path / "t" / "capital" / "_SUCCESS.json").exists()

    rerun = StageRunner(str(tmp_path), "t", LLMConfig(backend="scripted", script=SCRIPT, shard_size=2))
    out = rerun.run(stage, rows)
    metrics = rerun.summaries[-1].metrics
    assert metrics["requests_cached"] == 2 and metrics["requests_computed"] == 2
    assert out.column("answer").to_pylist() == ["Lima", "Paris", "Nairobi", "Tokyo"]


def test_blocks_over_ray_datas_size_target_are_not_split_within_a_stage(ray_local, tmp_path, monkeypatch):
    """A stage's input block is one partition: its duplicates collapse within it, and one
    in-process engine task answers its requests and writes its rows. Ray Data splits blocks over
    its size target; the stage turns that off, so 100 rows of ~280 bytes stay one partition."""
    import ray.data

    monkeypatch.setattr(ray.data.DataContext.get_current(), "target_max_block_size", 1024)  # bytes
    places = [f"Place {n}" for n in range(50)] * 2  # each asked twice, 50 rows apart
    script = {"smoke.capital": lambda v: v["country"].upper()}
    runner = StageRunner(str(tmp_path), "t", LLMConfig(backend="scripted", script=script, batch_size=8))
    stage = LLMStage("capital", "smoke.capital", parser=first_line, parsed_schema=ANSWER_SCHEMA)
    out = runner.run(stage, pa.table({"country": places}))
    assert out.column("answer").to_pylist() == [p.upper() for p in places]
    metrics = runner.summaries[-1].metrics
    assert metrics["requests_unique"] == metrics["requests_computed"] == 50
