"""The four corpus jobs by ``spark-submit`` to a standalone master whose worker has a disk of its
own, inputs and root on S3, no s3a (``conftest.spark_runs``): each exits 0, writes tables that
match its summary, and its tasks ran on the worker."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.cluster.conftest import ROOT
from udfs import storage
from udfs.schemas import ARTICLES, ARTICLES_REJECTED, SOURCE_REJECTED, WIKI_PAGES

pytestmark = pytest.mark.cluster


def succeeded(spark_runs, job: str):
    run = spark_runs.runs[job]
    assert run.returncode == 0, run.output()[-4000:]
    return run


def reconciles(marker: dict) -> bool:
    """A stored summary whose rows read are its rows written plus its rejected rows by reason."""
    rejected = sum(marker["rejected_by_reason"].values())
    return marker["reconciles"] and marker["rows_read"] == marker["rows_written"] + rejected


def rows_by(spec, column: str) -> Counter:
    table = spec.read(ROOT, columns=[column])
    return Counter(table.column(column).to_pylist())


@pytest.mark.parametrize("job", ["ingest_news", "ingest_articles_jsonl"])
def test_article_jobs_write_their_articles_to_s3(spark_runs, inputs, job):
    run = succeeded(spark_runs, job)
    marker = run.markers["articles"]
    [source] = marker["input_files"]
    assert source == inputs["warc" if job == "ingest_news" else "jsonl"]
    assert marker["rows_written"] > 0 and reconciles(marker)
    assert rows_by(ARTICLES, "warc_file")[source] == marker["rows_written"]
    assert rows_by(ARTICLES_REJECTED, "warc_file")[source] == marker["rows_rejected"]


def test_wikipedia_job_writes_pages_and_portal_events_to_s3(spark_runs, inputs):
    run = succeeded(spark_runs, "ingest_wikipedia")
    pages, days = run.markers["wiki_pages"], run.markers["wcep_events"]
    assert pages["job"] == days["job"] == "ingest_wikipedia"
    assert pages["rows_written"] > 0 and reconciles(pages) and reconciles(days)
    assert WIKI_PAGES.dataset(ROOT).count_rows() == pages["rows_written"]
    assert run.event_formats.get("wikitext") == days["metrics"]["events written"] > 0
    rejected = rows_by(SOURCE_REJECTED, "source")
    assert rejected["wiki_pages"] == pages["rows_rejected"]


def test_rendered_portal_job_writes_its_events_to_s3(spark_runs):
    run = succeeded(spark_runs, "ingest_wcep_html")
    days = run.markers["wcep_events"]
    assert days["job"] == "ingest_wcep_html" and days["rows_written"] > 0 and reconciles(days)
    assert run.event_formats.get("html") == days["metrics"]["events written"] > 0
    assert rows_by(SOURCE_REJECTED, "source")["wcep_html"] == days["rows_rejected"]


def test_a_root_on_the_drivers_disk_fails_instead_of_writing_nothing(spark_runs):
    """The executor writes under its own disk's copy of the path; the driver finds no file of the
    rows that went into the write: an error naming the cause, not a success line."""
    run = spark_runs.runs["driver_disk_root"]
    assert run.returncode != 0
    assert "the files it added hold 0" in run.output() and "storage every node shares" in run.output()


def test_every_job_ran_its_tasks_on_the_worker(spark_runs):
    """The executor logs are in the worker's own temp dir: one application per job, each with
    finished tasks; the driver wrote no table under its own temp dir."""
    assert len(list(spark_runs.worker_dir.glob("work/app-*"))) == len(spark_runs.runs)
    apps = {p.name for p in spark_runs.worker_dir.glob("work/app-*")}
    for app in apps:
        logs = "".join(
            p.read_text(errors="replace") for p in spark_runs.worker_dir.glob(f"work/{app}/*/stderr")
        )
        assert "Finished task" in logs, app
    assert storage.count_rows(ARTICLES.uri(ROOT)) > 0
