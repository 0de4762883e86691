"""The cluster files parse, every LLM config there builds a valid engine configuration for a GPU
type Ray knows, and the GPU image's lock pins the vLLM that Ray's own metadata pins."""

import importlib.metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from ray.util import accelerators

from pipelines.llm import backends, serve_engine
from pipelines.llm.config import LLMConfig

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster" / "ray"
GPU_LOCK = REPO / "cluster" / "gpu-constraints.txt"


@pytest.mark.parametrize("path", sorted(CLUSTER.glob("*.yaml")), ids=lambda p: p.name)
def test_manifests_parse(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs


@pytest.mark.parametrize("path", sorted((CLUSTER / "llm").glob("*.yaml")), ids=lambda p: p.name)
def test_llm_configs_build(path):
    cfg = LLMConfig.from_yaml(path)
    if cfg.backend == "vllm":
        engine = serve_engine.engine_kwargs(cfg)
        assert engine["tensor_parallel_size"] * cfg.concurrency <= 8
        assert engine["enable_prefix_caching"]
        known = {v for k, v in vars(accelerators).items() if k.isupper()}
        assert cfg.accelerator_type in known  # a name Ray gives GPUs
    else:
        assert backends.http_processor_config(cfg).url.endswith("/v1/completions")


def test_rayjob_entrypoint_names_a_shipped_config():
    job = yaml.safe_load((CLUSTER / "rayjob.yaml").read_text())
    config = job["spec"]["entrypoint"].split("--llm-config")[1].split()[0]
    assert (REPO / config).is_file()


def lock_pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a constraints file, by normalised name."""
    pins = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def test_gpu_lock_pins_the_vllm_of_ray_llm():
    """Ray's metadata (read now, from the installed ray) names the vLLM of its ``llm`` extra."""
    vllm = [
        Requirement(r)
        for r in importlib.metadata.requires("ray")
        if Requirement(r).name == "vllm" and Requirement(r).marker.evaluate({"extra": "llm"})
    ]
    assert len(vllm) == 1 and str(vllm[0].specifier).startswith("==")
    pins = lock_pins(GPU_LOCK)
    assert pins["vllm"] == str(vllm[0].specifier)[2:]
    assert pins["ray"] == importlib.metadata.version("ray")
    assert {"torch", "transformers"} <= set(pins)


def test_gpu_image_installs_with_the_gpu_lock():
    cpu, gpu = (REPO / "Dockerfile").read_text().split(" AS gpu")
    assert "-c constraints.txt" in cpu and "constraints.txt" not in gpu.replace("gpu-constraints.txt", "")
    assert "pip install -c cluster/gpu-constraints.txt -e '.[gpu]'" in gpu


def test_the_install_carries_rays_job_server():
    """``ray job submit`` needs the dashboard's job server, which is ``ray[default]``: the
    project's own dependencies ask for it and the lock pins every package it brings."""
    base = [Requirement(r) for r in importlib.metadata.requires("augury") if "extra ==" not in r]
    [ray] = [r for r in base if r.name == "ray"]
    assert {"data", "default"} <= ray.extras
    pins = lock_pins(REPO / "constraints.txt")
    needed = [
        Requirement(r)
        for r in importlib.metadata.requires("ray")
        if Requirement(r).marker is not None
        and Requirement(r).marker.evaluate({"extra": "default"})
        and not Requirement(r).marker.evaluate({"extra": ""})
    ]
    assert needed
    missing = [r.name for r in needed if r.name.lower().replace("_", "-") not in pins]
    assert not missing
    assert all(r.specifier.contains(pins[r.name.lower().replace("_", "-")]) for r in needed)


def test_the_cpu_image_can_be_a_ray_head_that_takes_jobs():
    cpu = (REPO / "Dockerfile").read_text().split(" AS gpu")[0]
    assert "EXPOSE 6379 8265" in cpu
