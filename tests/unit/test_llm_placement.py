"""What a vLLM replica asks Ray for, and whether a cluster holds it (no Ray cluster needed)."""

from pipelines.llm import placement, serve_engine
from pipelines.llm.config import LLMConfig

H100_NODE = {"CPU": 192.0, "GPU": 8.0, "memory": 2e12, "accelerator_type:H100": 1.0}


def test_default_bundles_are_one_gpu_and_one_cpu_per_worker():
    bundles = placement.replica_bundles(None, 4, None)
    assert bundles == [{"GPU": 1.0, "CPU": 1.0}] * 4
    assert placement.total(bundles, 2) == {"GPU": 8.0, "CPU": 8.0}


def test_accelerator_type_adds_its_resource_to_every_bundle():
    bundles = placement.replica_bundles(None, 2, "H100")
    assert all(b["accelerator_type:H100"] == placement.ACCELERATOR_SHARE for b in bundles)
    assert placement.total(bundles)["accelerator_type:H100"] == 2 * placement.ACCELERATOR_SHARE


def test_placement_group_config_replaces_the_default():
    assert placement.replica_bundles({"bundles": [{"CPU": 1}], "strategy": "PACK"}, 4, None) == [{"CPU": 1}]
    per_worker = placement.replica_bundles({"bundle_per_worker": {"GPU": 1, "CPU": 4}}, 2, "A100-80G")
    assert per_worker == [{"GPU": 1, "CPU": 4, "accelerator_type:A100-80G": 0.001}] * 2


def test_a_replicas_bundles_follow_the_engine_kwargs_and_hold_the_replica_actor():
    cfg = LLMConfig(
        backend="vllm",
        model="m",
        tensor_parallel_size=2,
        concurrency=3,
        accelerator_type="H100",
        engine_kwargs={"tensor_parallel_size": 4},  # the engine kwargs win, as in vLLM
    )
    bundles = serve_engine.serve_bundles(cfg)
    assert len(bundles) == 4 and bundles[0]["accelerator_type:H100"] > 0
    assert placement.total(bundles) == {"GPU": 4.0, "CPU": 5.0, "accelerator_type:H100": 0.004}

    cpu = cfg.replace(placement_group_config={"bundles": [{"CPU": 2}]}, accelerator_type=None)
    assert placement.total(serve_engine.serve_bundles(cpu), 3) == {"CPU": 9.0}


def test_shortfall_on_one_h100_node():
    llama = placement.replica_bundles(None, 4, "H100")  # TP=4
    assert placement.shortfall(placement.total(llama, 2), H100_NODE) == {}
    assert placement.shortfall(placement.total(llama, 3), H100_NODE) == {"GPU": 4.0}
    a100 = placement.total(placement.replica_bundles(None, 4, "A100-80G"))
    assert set(placement.shortfall(a100, H100_NODE)) == {"accelerator_type:A100-80G"}
    assert set(placement.shortfall(a100, {})) == {"GPU", "CPU", "accelerator_type:A100-80G"}


def test_shortfall_message_names_replica_count_and_cluster():
    per_replica = placement.total(placement.replica_bundles(None, 2, None))
    message = placement.shortfall_message(per_replica, 3, {"CPU": 4.0, "memory": 1e9})
    assert "\n" not in message
    assert "3 replica(s) of {CPU: 2, GPU: 2}" in message and "{CPU: 6, GPU: 6} in all" in message
    assert "the cluster has {CPU: 4, GPU: 0}" in message and "short of {CPU: 2, GPU: 6}" in message
