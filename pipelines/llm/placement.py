"""Will the cluster hold every vLLM replica? Wait a bounded time, then fail with the numbers.

Ray 2.60 places each vLLM engine replica on the bundles of ``placement_group_config`` or, without
one, on tensor_parallel × pipeline_parallel bundles of one GPU and one CPU, and with an
``accelerator_type`` it adds a sliver of the ``accelerator_type:<X>`` resource to every bundle
(``ray.llm._internal``: the batch stage and Serve's engine config alike). When the cluster cannot hold that, Ray
waits silently for ever ("Cluster resources are not enough to run any task"). Comparing the
cluster's total resources with what the replicas ask for turns that stall into an error. It is a
necessary condition only: totals can suffice while no single node can hold a bundle.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

log = logging.getLogger("augury.llm.placement")

DEFAULT_BUNDLE = {"GPU": 1.0, "CPU": 1.0}  # Ray 2.60's bundle per engine worker
ACCELERATOR_SHARE = 0.001  # what Ray adds of ``accelerator_type:<X>`` to each bundle
POLL_S = 5.0
_EPS = 1e-9


def replica_bundles(
    placement_group_config: dict[str, Any] | None, workers: int, accelerator_type: str | None
) -> list[dict[str, float]]:
    """The resource bundles of one replica, as Ray 2.60 builds them; ``workers`` is
    tensor_parallel × pipeline_parallel (what ``bundle_per_worker`` and the default multiply)."""
    config = placement_group_config or {}
    if config.get("bundles"):
        bundles = [dict(b) for b in config["bundles"]]
    else:
        bundles = [dict(config.get("bundle_per_worker") or DEFAULT_BUNDLE) for _ in range(workers)]
    if accelerator_type:
        for bundle in bundles:
            bundle[f"accelerator_type:{accelerator_type}"] = ACCELERATOR_SHARE
    return bundles


def total(bundles: list[dict[str, float]], times: int = 1) -> dict[str, float]:
    """The summed resources of ``bundles``, repeated ``times`` times."""
    summed: Counter[str] = Counter()
    for bundle in bundles:
        summed.update({k: float(v) * times for k, v in bundle.items()})
    return {k: v for k, v in summed.items() if v > 0}


def shortfall(need: dict[str, float], cluster: dict[str, float]) -> dict[str, float]:
    """The resources of ``need`` the cluster lacks, by how much; empty when it has them all."""
    return {k: v - cluster.get(k, 0.0) for k, v in need.items() if cluster.get(k, 0.0) + _EPS < v}


def _show(resources: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


def shortfall_message(per_replica: dict[str, float], replicas: int, cluster: dict[str, float]) -> str:
    """One line: what a replica needs, how many replicas, what the cluster has of those resources."""
    need = {k: v * replicas for k, v in per_replica.items()}
    has = {k: cluster.get(k, 0.0) for k in need}
    return (
        f"the vLLM stage needs {replicas} replica(s) of {_show(per_replica)}, {_show(need)} in all, "
        f"but the cluster has {_show(has)} (short of {_show(shortfall(need, cluster))}); add nodes or "
        "lower concurrency / tensor_parallel_size, or set accelerator_type / placement_group_config "
        "to match the nodes"
    )


def wait_for_replicas(bundles: list[dict[str, float]], replicas: int, timeout_s: float) -> None:
    """Return once the cluster's total resources hold ``replicas`` × ``bundles``; raise
    RuntimeError after ``timeout_s`` otherwise. While waiting, the bundles are requested from the
    autoscaler (a cluster that only waits creates no demand for it to act on); the request is
    withdrawn at the end, when the engine actors' own demand takes over."""
    import ray
    from ray.autoscaler.sdk import request_resources

    need = total(bundles, replicas)
    if not shortfall(need, ray.cluster_resources()):
        return
    log.info("waiting up to %g s for the cluster to hold %s", timeout_s, _show(need))
    request_resources(bundles=bundles * replicas)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            cluster = ray.cluster_resources()
            if not shortfall(need, cluster):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(shortfall_message(total(bundles), replicas, cluster))
            time.sleep(min(POLL_S, left))
    finally:
        request_resources(bundles=[])
