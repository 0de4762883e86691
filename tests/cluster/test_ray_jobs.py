"""The Ray entry points by ``ray job submit`` to a two-node cluster (``conftest.ray_cluster``),
with cluster/ray/runtime_env.cpu.yaml, root and every input on S3, the embedded model copied by
each node from S3, demo-sized limits: the index, the four builders, the evaluation and the audit
each succeed, write outputs that reconcile, and ran tasks on the second node."""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass

import pytest

from pipelines import builders
from tests.cluster.conftest import ROOT
from tests.cluster.nodes import REPO, base_env
from udfs import storage
from udfs.layout import Layout

pytestmark = pytest.mark.cluster

LAYOUT = Layout(ROOT)


@dataclass(frozen=True)
class RayRun:
    returncode: int  # of the ``ray job submit`` command
    status: str
    logs: str
    nodes: Counter  # node id → tasks and actors of the job that ran there


def jobs(inputs: dict[str, str], llm: str) -> dict[str, list[str]]:
    """Each entry point with the demo's limits, cut further where the demo runs for minutes."""
    model = ["--llm-config", llm]
    forecastbench = ["--forecastbench", inputs["fb_questions"], inputs["fb_resolutions"]]
    return {
        "index": ["pipelines.index", "--root", ROOT],
        # the demo's own flags, from the builder's declaration
        "tcelongbench": [
            "pipelines.tcelongbench",
            "--root",
            ROOT,
            *model,
            *builders.get("tcelongbench").demo.argv(""),
        ],
        "openforecast": ["pipelines.openforecast", "--root", ROOT, "--demo", *model, "--limit", "1"],
        "prophet": [
            "pipelines.prophet",
            "--root",
            ROOT,
            *model,
            *forecastbench,
            "--question-ids",
            "IHLIDXUS@2024-07-28",
            "--estimator",
            "logprob",
            "--rating",
            "score",
            "--num-queries",
            "2",
            "--search-depth",
            "6",
            "--top-n",
            "4",
            "--k-max",
            "2",
            "--max-new-tokens",
            "16",
            "--context-words",
            "40",
            "--rating-words",
            "60",
            "--cil-words",
            "25",
        ],
        "daily_oracle": [
            "pipelines.daily_oracle",
            "--root",
            ROOT,
            *model,
            "--from",
            "2022-09-15",
            "--to",
            "2022-09-15",
            "--publishers",
            "npr.org,chicago.suntimes.com,abc7.com",
            "--random",
            "1",
            "--hot",
            "0",
            # the local test's cap: room for the summary, questions and distractors, not for the
            # filter's form (its answers end as rejected rows): half the job's time at 360
            "--max-new-tokens",
            "128",
            "--max-input-tokens",
            "3072",
            "--article-words",
            "100",
        ],
        "evaluate": [
            "pipelines.evaluate",
            "--root",
            ROOT,
            *model,
            *forecastbench,
            "--limit",
            "1",
            "--k",
            "3",
            "--doc-words",
            "80",
            "--max-new-tokens",
            "40",
            "--modes",
            "closed_book,retrieval",
            "--retrievers",
            "bm25",
            "--answer-formats",
            "choice",
            "--model-cutoff",
            "2024-03-01",
        ],
        "audit": ["pipelines.audit", "--root", ROOT],
    }


def submit(cluster, name: str, module_args: list[str]) -> RayRun:
    """The README's command: ``ray job submit`` with the CPU runtime env, from the repository."""
    from ray.job_submission import JobSubmissionClient
    from ray.util.state import list_actors, list_tasks

    submission = f"augury-{name}"
    command = [
        "ray",
        "job",
        "submit",
        "--address",
        cluster.dashboard,
        "--submission-id",
        submission,
        "--runtime-env",
        "cluster/ray/runtime_env.cpu.yaml",
        "--",
        "python",
        "-m",
        *module_args,
    ]
    done = subprocess.run(
        command,
        cwd=REPO,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    client = JobSubmissionClient(cluster.dashboard)
    info = client.get_job_info(submission)
    filters = [("job_id", "=", info.job_id)] if info.job_id else []
    nodes: Counter = Counter()
    if filters:
        for item in [
            *list_tasks(cluster.dashboard, filters=filters, limit=10_000, raise_on_missing_output=False),
            *list_actors(cluster.dashboard, filters=filters, limit=1_000, raise_on_missing_output=False),
        ]:
            if item.node_id:
                nodes[item.node_id] += 1
    return RayRun(
        done.returncode, str(info.status), client.get_job_logs(submission) + done.stderr[-2000:], nodes
    )


@pytest.fixture(scope="session")
def ray_runs(spark_runs, llm_config, ray_cluster, inputs) -> dict[str, RayRun]:
    """Every entry point, in order, on the corpus the Spark jobs wrote to S3 (the Spark cluster
    is stopped before the Ray cluster starts: one at a time on a small machine)."""
    corpus = [run for name, run in spark_runs.runs.items() if name.startswith("ingest_")]
    assert all(run.returncode == 0 for run in corpus), "the corpus jobs failed"
    return {name: submit(ray_cluster, name, args) for name, args in jobs(inputs, llm_config).items()}


def succeeded(ray_runs, ray_cluster, name: str) -> RayRun:
    run = ray_runs[name]
    assert run.status == "SUCCEEDED" and run.returncode == 0, run.logs[-5000:]
    assert run.nodes[ray_cluster.worker] > 0, (name, dict(run.nodes))  # the second node took work
    return run


def test_index_job_builds_the_index_on_s3(ray_runs, ray_cluster):
    succeeded(ray_runs, ray_cluster, "index")
    manifest = storage.read_json(storage.join(LAYOUT.index(), "_partitions.json"))
    assert manifest  # one fingerprint per dated partition indexed
    assert storage.list_files(LAYOUT.index(), ".lance")


@pytest.mark.parametrize("builder", ["tcelongbench", "openforecast", "prophet", "daily_oracle"])
def test_builder_jobs_write_their_benchmark_to_s3(ray_runs, ray_cluster, builder):
    succeeded(ray_runs, ray_cluster, builder)  # the job's ledger checked that its counts reconcile
    card = storage.read_json(LAYOUT.benchmark(builder, "dataset_card.json"))
    cost = card["llm_cost"]["total"]
    assert cost["rows"] > 0 and cost["requests_total"] > 0
    items = storage.count_rows(LAYOUT.benchmark(builder, "eval_items"))
    rejected = storage.count_rows(LAYOUT.benchmark(builder, "rejected"))
    assert items + rejected > 0


def test_evaluation_job_writes_the_leaderboard_to_s3(ray_runs, ray_cluster):
    succeeded(ray_runs, ray_cluster, "evaluate")
    summary = storage.read_json(LAYOUT.eval("summary.json"))
    assert summary["items"] > 0 and summary["results_written"] > 0
    assert storage.count_rows(LAYOUT.eval("leaderboard.parquet")) > 0


def test_audit_job_finds_no_violation(ray_runs, ray_cluster):
    run = ray_runs["audit"]
    assert run.status == "SUCCEEDED" and run.returncode == 0, run.logs[-5000:]
    audit = storage.read_json(LAYOUT.eval("audit.json"))
    assert audit["violations"] == 0 and audit["benchmarks"]
