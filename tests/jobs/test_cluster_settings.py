"""The Python-worker settings of cluster/spark/spark-defaults.conf give the articles a local run
with Spark's defaults gives, and Spark's console progress bar only reaches a terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.ingest_news import Config, run
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


def ingest_in_a_new_spark(root: Path, path: Path, settings: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m jobs.ingest_news`` in its own local Spark (two cores) with ``settings``."""
    conf = " ".join(f"--conf {k}={v}" for k, v in settings.items())
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SPARK_MASTER": "local[2]",
        "PYSPARK_SUBMIT_ARGS": f"{conf} pyspark-shell",
    }
    return subprocess.run(
        [sys.executable, "-m", "jobs.ingest_news", "--root", str(root), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def articles(root: Path) -> list[dict]:
    rows = ARTICLES.read(str(root), columns=list(COMPARED)).to_pylist()
    return sorted(rows, key=lambda r: r["article_id"])


def test_the_conf_names_the_python_worker_settings():
    settings = python_worker_settings(CONF.read_text())
    assert set(settings) >= {"spark.executor.pyspark.memory", "spark.executor.cores"}


@pytest.mark.spark
def test_cluster_worker_settings_give_the_articles_of_a_default_run(spark, shared_data, tmp_path):
    path = shared_data / "warc" / CCNEWS
    run(Config(inputs=[str(path)], root=str(tmp_path / "default")), spark)
    expected = articles(tmp_path / "default")
    assert len(expected) >= 35

    settings = python_worker_settings(CONF.read_text())
    shipped = ingest_in_a_new_spark(tmp_path / "cluster", path, settings)
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    assert articles(tmp_path / "cluster") == expected

    # The limit really reaches the workers in local mode: the old 2g / 4 cores (512 MiB a worker)
    # does not give these articles.
    old = ingest_in_a_new_spark(
        tmp_path / "old",
        path,
        {**settings, "spark.executor.pyspark.memory": "2g", "spark.executor.cores": "4"},
    )
    assert old.returncode != 0 or articles(tmp_path / "old") != expected


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
