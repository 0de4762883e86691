"""The ``cluster`` tier: a cluster emulated on one machine, driven as the READMEs say.

* S3: a moto server, the only storage the nodes share.
* Spark: a standalone master and one worker (``spark-class …Master`` / ``…Worker`` on 127.0.0.1;
  pip's pyspark has no sbin scripts), the worker a node of its own (``tests.cluster.nodes``).
  The four corpus jobs are submitted with ``spark-submit`` from this machine (client mode: the
  driver runs here, the executor on the worker) with inputs and root on S3.
* Ray: a head and a worker started with ``ray start``, each a node of its own, ports of their
  own (no other Ray cluster on the machine is touched); jobs arrive by ``ray job submit``.

Every process is stopped at the end of the session, also when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.nodes import REPO, VENV_BIN, Processes, base_env, free_port, http_ok, wait_for

BUCKET = "augury"
ROOT = f"s3://{BUCKET}/root"
INPUTS = f"s3://{BUCKET}/inputs"
CCNEWS = "ccnews_2022-09_39records_reconstructed.warc.gz"
WCEP_FIXTURES = REPO / "tests" / "fixtures" / "wcep"
# The worker's size: two cores and 2 GiB of address space per Python worker (spark-defaults'
# share), scaled down from the conf's 4-core executors to a 2-core machine.
SPARK_SIZE = (
    "--conf spark.executor.cores=2 --conf spark.executor.memory=1g "
    "--conf spark.executor.pyspark.memory=4g --conf spark.driver.memory=1g"
)


@pytest.fixture(scope="session")
def tier(tmp_path_factory) -> Iterator[Processes]:
    """The tier's processes; all of them are stopped when the session ends."""
    base = tmp_path_factory.mktemp("cluster")
    (base / "logs").mkdir()
    processes = Processes(base / "logs")
    try:
        yield processes
    finally:
        processes.stop()
        for node in base.glob("node-*"):
            shutil.rmtree(node, ignore_errors=True)  # the nodes' model copies and spill files


@dataclass(frozen=True)
class S3:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """What a node's instance profile would give: the endpoint and credentials."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }


@pytest.fixture(scope="session")
def s3(tier) -> Iterator[S3]:
    """A moto S3 server in a process of its own, with the bucket every test writes to; this
    process reaches it through the same variables."""
    port = free_port()
    log = tier.log_dir / "moto.log"
    server = tier.start(
        "moto", [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], base_env()
    )
    endpoint = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(endpoint), "moto S3 server", 60, server, log)
    store = S3(endpoint)
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    from udfs import storage

    storage.filesystem(ROOT)[0].create_dir(BUCKET)
    try:
        yield store
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def upload(local: Path, uri: str) -> str:
    from udfs import storage

    storage.write_bytes(uri, local.read_bytes())
    return uri


@pytest.fixture(scope="session")
def inputs(s3, shared_data) -> dict[str, str]:
    """The sample inputs, copied to S3: the machine that submits has them, the nodes do not."""
    shared = shared_data
    files = {
        "warc": shared / "warc" / CCNEWS,
        "dump": shared / "wikipedia" / "dbpedia_minidump_enwiki.xml.bz2",
        "portal": WCEP_FIXTURES / "portal_export.xml",
        "wcep_html": shared / "wcep" / "wcep_portal_daily_html_2025-09_2026-08.jsonl.gz",
        "wcep_rss": shared / "wcep" / "wp_current_events_2026-08.rss",
        "jsonl": shared / "wcep" / "reportedly_articles_2015-09.json",
        "fb_questions": shared / "questions" / "forecastbench_2024-07-21-human.json",
        "fb_resolutions": shared / "questions" / "forecastbench_2024-07-21_resolution_set.json",
    }
    return {key: upload(path, f"{INPUTS}/{path.name}") for key, path in files.items()}


# ---------------------------------------------------------------- Spark


@dataclass(frozen=True)
class SparkRun:
    job: str
    returncode: int
    log: Path
    markers: dict[str, dict]  # table → its _SUCCESS.json right after the run (absent: not written)
    # wcep_events rows by source_format right after the run: a later job replaces the days it
    # also holds (the rendered portal archive covers the wikitext sample's days)
    event_formats: dict[str, int]

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass(frozen=True)
class SparkRuns:
    runs: dict[str, SparkRun]
    worker_dir: Path  # the worker's /tmp, seen from this machine

    def executor_logs(self) -> str:
        """Every executor log the worker wrote (under its work dir, one folder per application)."""
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.worker_dir.glob("work/app-*/*/stderr"))
        )


def markers() -> dict[str, dict]:
    from udfs import storage
    from udfs.schemas import ARTICLES, WCEP_EVENTS, WIKI_PAGES

    return {
        spec.name: storage.read_marker(spec.uri(ROOT))
        for spec in (ARTICLES, WIKI_PAGES, WCEP_EVENTS)
        if storage.is_done(spec.uri(ROOT))
    }


def event_formats() -> dict[str, int]:
    from udfs import storage
    from udfs.schemas import WCEP_EVENTS

    if not storage.is_done(WCEP_EVENTS.uri(ROOT)):
        return {}
    column = WCEP_EVENTS.read(ROOT, columns=["source_format"]).column("source_format")
    return dict(Counter(column.to_pylist()))


def spark_submit(master: str, s3: S3, zip_path: Path, job: str, *args: str) -> list[str]:
    """The README's command for a standalone cluster without s3a: the conf's packages line
    emptied (no Maven here), executors told where S3 is, sized for the worker."""
    aws = [f"--conf spark.executorEnv.{k}={v}" for k, v in s3.env.items()]
    command = (
        f"spark-submit --master {master} --py-files {zip_path} "
        f"--properties-file cluster/spark/spark-defaults.conf --conf spark.jars.packages= "
        f"{SPARK_SIZE} {' '.join(aws)} --conf spark.pyspark.python={VENV_BIN / 'python'}"
    )
    return [*command.split(), job, *args]


@pytest.fixture(scope="session")
def spark_runs(tier, s3, inputs) -> SparkRuns:
    """A standalone master and worker, the four corpus jobs submitted to them (root and inputs on
    S3), then the cluster stopped; each run's exit status and log are kept for the tests."""
    base = tier.log_dir.parent
    master_port, master_ui, worker_ui = free_port(), free_port(), free_port()
    daemon = base_env(SPARK_DAEMON_MEMORY="512m")
    master = tier.start(
        "spark-master",
        [
            "spark-class",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(master_port),
            "--webui-port",
            str(master_ui),
        ],
        daemon,
    )
    url = f"spark://127.0.0.1:{master_port}"
    worker_dir = base / "node-spark-worker"
    worker = tier.start(
        "spark-worker",
        [
            "spark-class",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(worker_ui),
            "--cores",
            "2",
            "--memory",
            "3g",
            "--work-dir",
            "/tmp/work",
            url,
        ],
        daemon,
        node_dir=worker_dir,
    )

    def alive_workers() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{master_ui}/json/", timeout=5) as r:
                return any(w["state"] == "ALIVE" for w in json.load(r)["workers"])
        except OSError:
            return False

    wait_for(alive_workers, "the Spark worker's registration", 120, worker, tier.log_dir / "spark-worker.log")
    zip_path = base / "augury-pyfiles.zip"
    subprocess.run(
        ["cluster/spark/build-pyfiles.sh", str(zip_path)], cwd=REPO, check=True, capture_output=True
    )
    jobs = {
        "ingest_news": ["jobs/ingest_news.py", "--root", ROOT, inputs["warc"]],
        "ingest_wikipedia": ["jobs/ingest_wikipedia.py", "--root", ROOT, inputs["dump"], inputs["portal"]],
        "ingest_wcep_html": [
            "jobs/ingest_wcep_html.py",
            "--root",
            ROOT,
            inputs["wcep_html"],
            inputs["wcep_rss"],
        ],
        "ingest_articles_jsonl": ["jobs/ingest_articles_jsonl.py", "--root", ROOT, inputs["jsonl"]],
        # a root on the driver's own disk, which the worker does not see: must fail, not succeed empty
        "driver_disk_root": [
            "jobs/ingest_articles_jsonl.py",
            "--root",
            str(base / "driver-root"),
            inputs["jsonl"],
        ],
    }
    driver_env = base_env(**s3.env, PYSPARK_PYTHON=str(VENV_BIN / "python"))
    runs = {}
    try:
        for name, (job, *args) in jobs.items():
            log = tier.log_dir / f"{name}.log"
            process = tier.start(name, spark_submit(url, s3, zip_path, job, *args), driver_env)
            returncode = process.wait(timeout=900)
            runs[name] = SparkRun(name, returncode, log, markers(), event_formats())
    finally:
        tier.stop(worker)
        tier.stop(master)
    return SparkRuns(runs, worker_dir)


# ---------------------------------------------------------------- Ray


@dataclass(frozen=True)
class RayCluster:
    dashboard: str  # the job server's address
    head: str  # node ids
    worker: str


def ray_node_ports(*names: str) -> list[str]:
    """Every port a Ray node would otherwise take at a fixed default, given one of its own."""
    return [f"--{name}={free_port()}" for name in names]


def start_ray_node(tier, name: str, argv: list[str], env: dict[str, str], ready, attempts: int = 3):
    """Start a Ray node until ``ready()`` holds. Its raylet gives the node's Python agents a fixed
    time to come up and exits when they are late, which a loaded machine can make them: a node
    that did not come up is stopped and started again."""
    for attempt in range(attempts):
        node = tier.start(
            name, [*argv, *ray_node_ports(*AGENT_PORTS)], env, node_dir=tier.log_dir.parent / f"node-{name}"
        )
        try:
            wait_for(ready, f"Ray node {name}", 180, node, tier.log_dir / f"{name}.log")
            return node
        except RuntimeError:
            tier.stop(node)
            if attempt == attempts - 1:
                raise


AGENT_PORTS = (
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
    "metrics-export-port",
)


@pytest.fixture(scope="session")
def ray_cluster(tier, s3) -> RayCluster:
    """``ray start --head`` and ``ray start --address`` as two nodes of their own, every port
    their own: no other Ray cluster on this machine is touched, and no global ``ray stop``."""
    from ray.util.state import list_nodes

    gcs, dashboard = free_port(), free_port()
    address = f"http://127.0.0.1:{dashboard}"
    # Ray's memory monitor weighs the whole machine's memory: on one machine shared with other
    # work it kills this cluster's workers for memory others hold, so the emulated nodes run
    # without it (a real node is the cluster's alone).
    env = base_env(**s3.env, RAY_memory_monitor_refresh_ms="0")
    per_node = ["--block", "--temp-dir=/tmp/ray", "--object-store-memory=400000000", "--disable-usage-stats"]

    def nodes() -> list:
        try:
            return [n for n in list_nodes(address=address) if n.state == "ALIVE"]
        except Exception:  # the state API answers once the head's dashboard is up
            return []

    start_ray_node(
        tier,
        "ray-head",
        [
            "ray",
            "start",
            "--head",
            f"--port={gcs}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--ray-client-server-port={free_port()}",
            "--num-cpus=1",
            *per_node,
        ],
        env,
        lambda: http_ok(f"{address}/api/version") and len(nodes()) == 1,
    )
    start_ray_node(
        tier,
        "ray-worker",
        ["ray", "start", f"--address=127.0.0.1:{gcs}", "--num-cpus=3", *per_node],
        env,
        lambda: len(nodes()) == 2,
    )
    alive = nodes()
    [head_id] = [n.node_id for n in alive if n.is_head_node]
    [worker_id] = [n.node_id for n in alive if not n.is_head_node]
    return RayCluster(address, head_id, worker_id)


@pytest.fixture(scope="session")
def llm_config(s3, tier) -> str:
    """An --llm-config file on S3 naming the embedded model's checkpoint published there once
    (README: ``python -m pipelines.llm.local_model --publish URI``); each node copies it."""
    from udfs import storage

    model = f"s3://{BUCKET}/models/gemma-3-270m"
    published = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "pipelines.llm.local_model", "--publish", model],
        cwd=REPO,
        env={**os.environ},
        capture_output=True,
        text=True,
        check=False,
    )
    assert published.returncode == 0, published.stderr[-3000:]
    uri = f"s3://{BUCKET}/conf/embedded.yaml"
    storage.write_bytes(uri, f"backend: local\nmodel_dir: {model}\n".encode())
    return uri
