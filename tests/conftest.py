"""Shared fixtures: the real sample data, a local Spark session, a moto S3 server.

Everything here is real: Spark runs in local mode, S3 is moto's server speaking the S3 wire
protocol to s3fs, and the sample files are the ones in ``../shared/data``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Ray starts its workers at niceness 15, below their raylet. With two test workers on two cores,
# one worker's Spark jobs (niceness 0) then left the other's model engine (a Ray worker) about 3 %
# of a core: the engines decode at the priority of everything else instead.
os.environ.setdefault("RAY_worker_niceness", "0")
# Spark's settings for a local JVM on a small machine (the demo's too): every Spark the suite
# starts, in this process or in a subprocess, reads them (cluster/spark/local/spark-defaults.conf).
os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "cluster" / "spark" / "local"))


def shared_data_dir() -> Path:
    """``$AUGURY_SHARED_DATA`` or ``../shared/data`` next to the repository."""
    path = Path(os.environ.get("AUGURY_SHARED_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        raise RuntimeError(f"sample data not found at {path}; set AUGURY_SHARED_DATA")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return shared_data_dir()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A moto S3 server on localhost; boto/s3fs clients find it through AWS_ENDPOINT_URL.

    It serves moto's S3 application alone. moto's own server dispatches every request among all
    its services (a few hundred directory checks and URL patterns under one lock): about half of
    the server's CPU time in a profile of the WCEP S3 test, for requests that are all S3."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a log line per request
    server = make_server(
        "127.0.0.1", 0, create_backend_app("s3"), threaded=True, request_handler=MotoRequestHandler
    )
    thread = threading.Thread(target=server.serve_forever, name="moto-s3", daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    }
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
    )
    yield endpoint
    server.shutdown()
    thread.join()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def s3_root(s3_server: str) -> str:
    """A fresh, empty bucket on the moto server, as an ``s3://`` root URI."""
    import s3fs

    from udfs.storage import s3_filesystem_options

    bucket = f"augury-test-{uuid.uuid4().hex[:10]}"
    s3fs.S3FileSystem(**s3_filesystem_options()).mkdir(bucket)
    return f"s3://{bucket}/root"


@pytest.fixture(scope="session")
def spark(s3_server: str):
    """One local Spark session for the whole run (started after the S3 env so workers inherit it)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("augury-tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# A test's tiers follow from the fixtures it uses, directly or through other fixtures (a test on
# ``corpus_root`` runs Spark and Ray whatever its module declares). What ``spark`` and
# ``ray_local`` themselves use is how they start (Spark after the S3 server, so its workers see the
# endpoint; Ray after the model's conversion), not what their tests exercise: the walk stops there.
# (heaviest tier first: the order ``make test``'s workers take files in)
TIER_OF_FIXTURE = {"local_model_dir": "llm", "ray_local": "ray", "spark": "spark", "s3_server": "s3"}
STARTERS = {"spark", "ray_local"}
HEAVIEST_FIRST = list(TIER_OF_FIXTURE.values())


def fixtures_used(item: pytest.Item) -> set[str]:
    """The fixtures ``item`` requests and, transitively, those they request (up to STARTERS)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    seen: set[str] = set()
    todo = list(info.initialnames)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in STARTERS:
            for definition in info.name2fixturedefs.get(name, ()):
                todo.extend(definition.argnames)
    return seen


def escaped_ids(names: list[str]) -> list[str]:
    """The test IDs that carry escaped bytes or non-ASCII text. pytest-xdist's workers collect
    separately and must get the same IDs; a parameter made at import time (a gzip member stamps
    the current second) gave two workers two IDs and stopped the run, so such parameters carry
    explicit ``ids``. Failing them at setup names them under pytest-xdist too, where a worker's
    collection error would only show as a crash."""
    return [name for name in names if "\\x" in name or "\\u" in name or not name.isascii()]


ESCAPED = pytest.StashKey[set[str]]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.nodeid in item.config.stash.get(ESCAPED, set()):
        pytest.fail("give this test's parameters explicit ids (see escaped_ids in tests/conftest.py)")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fail the tests whose IDs could differ between collections (``escaped_ids``). Mark every test
    with the tiers of its fixtures; tests under ``tests/cluster`` are the ``cluster`` tier. Then
    put the files with the heaviest tier first (the model, then Ray, then Spark), each file's tests
    together and in order: ``make test``'s workers take whole files in this order, so the long
    files start first and the short ones fill in at the end. Under pytest-xdist, write the files'
    units (``write_work_units``)."""
    config.stash[ESCAPED] = set(escaped_ids([item.nodeid for item in items]))
    weight: dict[Path, int] = {}
    for item in items:
        used = fixtures_used(item)
        for fixture, tier in TIER_OF_FIXTURE.items():
            if fixture in used:
                item.add_marker(tier)
        if "cluster" in item.path.relative_to(config.rootpath).parts[:2]:
            item.add_marker("cluster")
        heaviest = min(
            (HEAVIEST_FIRST.index(m.name) for m in item.iter_markers() if m.name in HEAVIEST_FIRST),
            default=len(HEAVIEST_FIRST),
        )
        weight[item.path] = min(weight.get(item.path, heaviest), heaviest)
    items.sort(key=lambda item: weight[item.path])
    write_work_units(config, items)


# The units of ``--dist loadfile``. Every file that starts Spark is one unit, which one worker runs
# file after file: a worker that runs a Spark file starts a JVM of its own and warms it up (the
# eight Spark-only files took 267 CPU-seconds in one session, 326 split over two), and the files
# that read the sample corpus or the demo-like root, which the first of them builds
# (``built_once``), never wait while the other worker builds it. Any other file is a unit of its
# own. A file's tiers are known where tests are collected, on the workers: each writes the units of
# its collection to the file the controller names in its ``workerinput`` (``UNITS``), and the
# controller's scheduler reads them there.
SPARK_UNIT = "spark"
UNITS = "augury_units"
UNITS_PATH = pytest.StashKey[Path]()


def work_units(tiers: dict[str, set[str]]) -> dict[str, str]:
    """The unit of each test file, from the tiers of its tests: ``SPARK_UNIT`` or its own path."""
    return {path: SPARK_UNIT if "spark" in marks else path for path, marks in tiers.items()}


def write_work_units(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker of a ``--dist loadfile`` run: its files' units, where the
    controller reads them (written whole, then renamed: both workers write the same units)."""
    target = getattr(config, "workerinput", {}).get(UNITS)
    if not target:
        return
    tiers: dict[str, set[str]] = {}
    for item in items:
        marks = {m.name for m in item.iter_markers()} & set(HEAVIEST_FIRST)
        tiers.setdefault(item.nodeid.split("::", 1)[0], set()).update(marks)
    partial = Path(f"{target}.{config.workerinput['workerid']}")
    partial.write_text(json.dumps(work_units(tiers)))
    partial.replace(target)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hooks: a run without xdist has none
def pytest_configure_node(node) -> None:
    """The controller names the file its workers write their units to (``write_work_units``)."""
    config = node.config
    if config.getoption("dist") == "loadfile":
        if UNITS_PATH not in config.stash:
            config.stash[UNITS_PATH] = Path(tempfile.mkdtemp(prefix="augury-units-")) / "units.json"
        node.workerinput[UNITS] = str(config.stash[UNITS_PATH])


def pytest_unconfigure(config: pytest.Config) -> None:
    if UNITS_PATH in config.stash:
        shutil.rmtree(config.stash[UNITS_PATH].parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile`` with the units the workers wrote (a file not there is its own unit)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # read once, when scheduling starts: every worker has collected
                path = config.stash.get(UNITS_PATH, None)
                self.units = json.loads(path.read_text()) if path and path.exists() else {}
            path = nodeid.split("::", 1)[0]
            return self.units.get(path, path)

    return Scheduling(config, log)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files instead of comparing")


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture(scope="session")
def local_model_dir() -> Path:
    """The embedded Gemma 3 270M as a plain checkpoint (converted once, then cached)."""
    from pipelines.llm.local_model import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="session")
def engine(local_model_dir):
    """One in-process local engine (one thread) for the tests of the engine's own parts; a test
    that swaps a part puts it back."""
    from pipelines.llm.local_engine import LocalEngine

    return LocalEngine(str(local_model_dir), threads=1)


@pytest.fixture(scope="session")
def ray_local(local_model_dir):
    """A local Ray cluster for the whole run, started as a job starts it; local engine actors
    persist across tests."""
    import ray

    from pipelines.llm.config import LLMConfig
    from pipelines.llm.ray_env import ensure_ray

    ensure_ray(LLMConfig(ray_num_cpus=4))
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def built_once(tmp_path_factory) -> Callable[[str, Callable[[Path], None]], str]:
    """``built_once(name, build)``: ``<run temp>/<name>/root``, made by ``build(root)`` once for
    the whole run. Under pytest-xdist the run's temp directory is the workers' common parent: the
    first worker to ask builds it while the others wait on its lock, so an expensive read-only
    input is built once, not once per worker. A build that raises leaves no marker (the next one
    to ask builds again)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent

    def once(name: str, build: Callable[[Path], None]) -> str:
        home = base / name
        home.mkdir(exist_ok=True)
        root, marker = home / "root", home / "built"
        with (home / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.is_file():
                shutil.rmtree(root, ignore_errors=True)
                build(root)
                marker.touch()
        return str(root)

    return once


@pytest.fixture(scope="session")
def copy_root(tmp_path_factory) -> Callable[[str], str]:
    """Copies a read-only session root (``toy_index``, ``corpus_root``, ``reportedly_root``) to a
    fresh directory, for a module or a test that writes under it."""

    def copy(root: str) -> str:
        return str(shutil.copytree(root, tmp_path_factory.mktemp("copy") / "root"))

    return copy


@pytest.fixture(scope="session")
def toy_index(built_once, ray_local) -> str:
    """A root holding the evaluation tests' toy articles (invented news about a river port,
    ``tests/fixtures/evaluate``) and their article index with the index job's defaults (the
    bundled sentence encoder, passages of 100 and 512 words), built once for every module that
    evaluates on them. Treat it as read-only; ``copy_root`` it to write beside it."""
    from pipelines.index import build as index_build
    from pipelines.index.config import Config as IndexConfig
    from tests.fixtures.evaluate.data import write_articles

    def build(root: Path) -> None:
        write_articles(str(root))
        index_build.run(IndexConfig(root=str(root)))

    return built_once("toy_index", build)


@pytest.fixture(scope="session")
def reportedly_root(built_once, shared_data, ray_local) -> str:
    """A root holding only the real reported.ly articles of September 2015 and their article
    index (``write_reportedly_articles``), built once for the TCELongBench tests. Treat it as
    read-only; ``copy_root`` it to write beside it."""
    from tests.pipelines.test_tcelongbench_pipeline import write_reportedly_articles

    return built_once("reportedly", lambda root: write_reportedly_articles(str(root), shared_data))


@pytest.fixture(scope="session")
def corpus_root(built_once, spark, shared_data, ray_local) -> str:
    """A root holding the real corpus, built once per session by the real Spark jobs from the
    sample data: CC-NEWS articles (news-please), the dbpedia minidump plus the WCEP wikitext
    fixtures, and the rendered WCEP day pages, and the article index over it (as after the
    demo's index step). Treat it as read-only; copy it (``root_with_corpus``) to write beside it."""
    return built_once("corpus", lambda root: _ingest_sample(str(root), spark, shared_data))


def _ingest_sample(root: str, spark, shared_data: Path) -> None:
    """The sample corpus under ``root`` by the corpus jobs, and its article index."""
    from jobs import ingest_news, ingest_wcep_html, ingest_wikipedia
    from pipelines.index import build as index_build
    from pipelines.index.config import Config as IndexConfig

    ingest_news.run(
        ingest_news.Config(
            inputs=[str(shared_data / "warc" / "ccnews_2022-09_39records_reconstructed.warc.gz")], root=root
        ),
        spark,
    )
    fixtures = Path(__file__).resolve().parent / "fixtures" / "wcep"
    ingest_wikipedia.run(
        ingest_wikipedia.Config(
            root=root,
            dumps=[
                str(shared_data / "wikipedia" / "dbpedia_minidump_enwiki.xml.bz2"),
                str(fixtures / "portal_export.xml"),
            ],
        ),
        spark,
    )
    ingest_wcep_html.run(
        ingest_wcep_html.Config(
            root=root, inputs=[str(shared_data / "wcep" / "wcep_portal_daily_html_2025-09_2026-08.jsonl.gz")]
        ),
        spark,
    )
    index_build.run(IndexConfig(root=root))


@pytest.fixture
def root_with_corpus(corpus_root, tmp_path) -> str:
    """A fresh root for one test, holding a copy of the session's corpus."""
    target = tmp_path / "root"
    shutil.copytree(corpus_root, target)
    return str(target)
