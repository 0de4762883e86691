"""The Python-worker settings of cluster/spark/spark-defaults.conf give the articles a local run
with Spark's defaults gives, and Spark's console progress bar only reaches a terminal."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from subprocess import PIPE

import pytest

from jobs.spark import console_progress
from udfs.schemas import ARTICLES

REPO = Path(__file__).resolve().parents[2]
CONF = REPO / "cluster" / "spark" / "spark-defaults.conf"
LOCAL_CONF = REPO / "cluster" / "spark" / "local" / "spark-defaults.conf"
CCNEWS = "ccnews_2022-09_39records_reconstructed.warc.gz"
COMPARED = ("article_id", "title", "text", "published_at", "language", "canonical_url", "text_hash")


def python_worker_settings(text: str) -> dict[str, str]:
    """The settings of a spark-defaults file that shape Python workers: their memory limit, the
    number of workers that share it, and their reuse."""
    settings = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and not parts[0].startswith("#"):
            key, value = parts[0], parts[1].strip()
            if key in ("spark.executor.pyspark.memory", "spark.executor.cores") or key.startswith(
                "spark.python."
            ):
                settings[key] = value
    return settings


def ingest_in_a_new_spark(
    root: Path, path: Path, settings: dict[str, str], timeout: float = 1800
) -> subprocess.CompletedProcess | None:
    """``python -m jobs.ingest_news`` in its own local Spark (two cores) with ``settings``; None
    when it has not ended after ``timeout`` seconds (its process group, JVM and Python workers
    included, is then killed)."""
    conf = " ".join(f"--conf {k}={v}" for k, v in settings.items())
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SPARK_MASTER": "local[2]",
        "PYSPARK_SUBMIT_ARGS": f"{conf} pyspark-shell",
        # fastwarc panics when Python cannot allocate an object; with RUST_BACKTRACE set, Rust's
        # panic hook takes its backtrace lock to print one, symbolizing it allocates, fails, and
        # the allocation-error hook waits on that same lock: the worker hangs for good
        "RUST_BACKTRACE": "0",
    }
    argv = [sys.executable, "-m", "jobs.ingest_news", "--root", str(root), str(path)]
    proc = subprocess.Popen(argv, env=env, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def articles(root: Path) -> list[dict]:
    rows = ARTICLES.read(str(root), columns=list(COMPARED)).to_pylist()
    return sorted(rows, key=lambda r: r["article_id"])


def test_the_conf_names_the_python_worker_settings():
    settings = python_worker_settings(CONF.read_text())
    assert set(settings) >= {"spark.executor.pyspark.memory", "spark.executor.cores"}


@pytest.mark.spark
def test_cluster_worker_settings_give_the_articles_of_a_default_run(corpus_root, shared_data, tmp_path):
    # the session's corpus holds this WARC's articles from a default run in the suite's Spark
    path = shared_data / "warc" / CCNEWS
    expected = articles(Path(corpus_root))
    assert len(expected) >= 35

    settings = python_worker_settings(CONF.read_text())
    started = time.monotonic()
    shipped = ingest_in_a_new_spark(tmp_path / "cluster", path, settings)
    took = time.monotonic() - started
    assert shipped is not None, "the run with the cluster's settings did not end"
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert articles(tmp_path / "cluster") == expected

    # The limit really reaches the workers in local mode: the old 2g / 4 cores (512 MiB a worker)
    # does not give these articles: the job fails within about 20 s. A run that has not ended in
    # three times the time the shipped settings took (a minute at least) counts as hung, as the
    # worker at its limit did inside the native WARC reader with RUST_BACKTRACE set (above).
    old = ingest_in_a_new_spark(
        tmp_path / "old",
        path,
        {**settings, "spark.executor.pyspark.memory": "2g", "spark.executor.cores": "4"},
        timeout=max(60.0, 3 * took),
    )
    assert old is None or old.returncode != 0 or articles(tmp_path / "old") != expected


def marked(mark: str) -> list[str]:
    """The processes (other than this one) whose environment holds ``mark``."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if environ.parent.name != str(os.getpid()) and mark.encode() in environ.read_bytes():
                found.append(environ.parent.name)
    return found


@pytest.mark.spark
def test_a_run_past_its_timeout_ends_with_its_process_group(shared_data, tmp_path, monkeypatch):
    mark = f"AUGURY_TIMEOUT_TEST={os.getpid()}-{time.time_ns()}"  # inherited by the JVM and workers
    monkeypatch.setenv(*mark.split("="))
    assert ingest_in_a_new_spark(tmp_path / "late", shared_data / "warc" / CCNEWS, {}, timeout=3) is None
    for _ in range(100):  # SIGKILL is delivered at once; a killed process may take a moment to go
        if not marked(mark):
            break
        time.sleep(0.1)
    assert marked(mark) == []  # nothing of the run is left: its JVM and Python workers are gone


@pytest.mark.spark
def test_the_suites_spark_runs_with_the_local_jvm_options(spark):
    """The suite points SPARK_CONF_DIR at cluster/spark/local (as the demo does), and the options
    written there are the ones the running JVM was started with."""
    assert Path(os.environ["SPARK_CONF_DIR"]) / "spark-defaults.conf" == LOCAL_CONF
    (line,) = [
        x for x in LOCAL_CONF.read_text().splitlines() if x.startswith("spark.driver.extraJavaOptions")
    ]
    options = line.split()[1:]
    assert "-XX:TieredStopAtLevel=1" in options and "-XX:+UseSerialGC" in options
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(options) <= set(runtime.getInputArguments())


def test_console_progress_bar_only_on_a_terminal():
    assert console_progress(io.StringIO()) == "false"
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w") as terminal:
            assert console_progress(terminal) == "true"
    finally:
        os.close(leader)
    closed = io.StringIO()
    closed.close()
    assert console_progress(closed) == "false"
