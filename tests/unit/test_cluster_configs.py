"""The cluster files parse, and every LLM config there builds a valid engine configuration."""

from pathlib import Path

import pytest
import yaml

from pipelines.llm import backends
from pipelines.llm.config import LLMConfig

CLUSTER = Path(__file__).resolve().parents[2] / "cluster" / "ray"


@pytest.mark.parametrize("path", sorted(CLUSTER.glob("*.yaml")), ids=lambda p: p.name)
def test_manifests_parse(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs


@pytest.mark.parametrize("path", sorted((CLUSTER / "llm").glob("*.yaml")), ids=lambda p: p.name)
def test_llm_configs_build(path):
    cfg = LLMConfig.from_yaml(path)
    if cfg.backend == "vllm":
        proc = backends.vllm_processor_config(cfg)
        assert proc.engine_kwargs["tensor_parallel_size"] * cfg.concurrency <= 8
        assert proc.engine_kwargs["enable_prefix_caching"]
    else:
        assert backends.http_processor_config(cfg).url.endswith("/v1/completions")


def test_rayjob_entrypoint_names_a_shipped_config():
    job = yaml.safe_load((CLUSTER / "rayjob.yaml").read_text())
    config = job["spec"]["entrypoint"].split("--llm-config")[1].split()[0]
    assert (CLUSTER.parents[1] / config).is_file()
