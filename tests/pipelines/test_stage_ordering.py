"""Request order and dedup in the stage runner, with the engine replaced by a recorder (the real
engine path is covered by tests/pipelines); this checks only what the runner hands the engine."""

import pyarrow as pa
import pytest
import ray.data

import pipelines.llm.backends as backends
import pipelines.llm.ray_env as ray_env
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner


class _Recorder:
    def __init__(self):
        self.prompts: list[str] = []

    def __call__(self, ds, cfg, then, carry=()):
        table = pa.concat_tables(list(ds.iter_batches(batch_format="pyarrow")))
        self.prompts += table.column("prompt_text").to_pylist()
        answered = ds.map_batches(
            lambda b: {
                "request_key": b["request_key"],
                "generated_text": ["x"] * len(b["request_key"]),
                "input_tokens": [1] * len(b["request_key"]),
                "output_tokens": [1] * len(b["request_key"]),
                **{c: b[c] for c in carry},  # the runner's bookkeeping travels with each request
            },
            batch_format="numpy",
        )
        return answered.map_batches(
            then[0],
            fn_constructor_kwargs=then[1],
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=1),
        )


@pytest.mark.ray
def test_requests_reach_the_engine_sorted_and_unique(tmp_path, monkeypatch, ray_local):
    recorder = _Recorder()
    monkeypatch.setattr(backends, "apply_backend", recorder)
    monkeypatch.setattr(ray_env, "ensure_ray", lambda cfg: None)
    rows = pa.table({"country": ["Peru", "Chad", "Peru", "Angola", "Chad"]})
    runner = StageRunner(str(tmp_path), "t", LLMConfig())
    out = runner.run(LLMStage("c", "smoke.capital"), rows)
    assert recorder.prompts == sorted(set(recorder.prompts)) and len(recorder.prompts) == 3
    assert out.column("raw_text").to_pylist() == ["x"] * 5
