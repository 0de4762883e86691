"""How pytest-xdist's workers see the tests (tests/conftest.py): ``escaped_ids``, the test IDs
that workers could collect differently, which fail at setup with a message asking for explicit
ids; ``work_units``, the files ``--dist loadfile`` gives one worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SPARK_UNIT, escaped_ids, work_units

REPO = Path(__file__).resolve().parents[2]

# As pytest writes them: a gzip member made at import time (its header stamps the current
# second, so two workers got two IDs and CI stopped), and a non-ASCII string.
STAMPED = (
    r"tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-\x1f\x8b\x08\x00]\xcf\x0bk-False]"
)
NON_ASCII = r"tests/unit/test_prophet_outputs.py::test_query_form_examples[S\xe3o Paulo-True]"
PLAIN = "tests/unit/test_wikidump.py::test_files_without_pages[crawl.warc.gz-bytes-False]"


def test_ids_with_escaped_bytes_or_text_are_refused_and_plain_ones_pass():
    assert escaped_ids([STAMPED, PLAIN, NON_ASCII, "tests/a.py::test_b[São]"]) == [
        STAMPED,
        NON_ASCII,
        "tests/a.py::test_b[São]",
    ]
    assert escaped_ids([PLAIN, "tests/a.py::test_b[x-1]"]) == []


def test_the_files_that_start_spark_are_one_unit_and_other_files_their_own():
    tiers = {
        "tests/a.py": {"spark", "ray"},
        "tests/b.py": {"spark"},
        "tests/c.py": {"ray"},
        "tests/d.py": set(),
    }
    assert work_units(tiers) == {
        "tests/a.py": SPARK_UNIT,
        "tests/b.py": SPARK_UNIT,
        "tests/c.py": "tests/c.py",
        "tests/d.py": "tests/d.py",
    }


# a plugin that logs which worker starts each test (the controller, which relays the workers'
# reports, is no worker)
WHERE = """
import os
def pytest_runtest_logstart(nodeid, location):
    if "PYTEST_XDIST_WORKER" in os.environ:
        with open(os.environ["WHERE_OUT"], "a") as f:
            f.write(os.environ["PYTEST_XDIST_WORKER"] + " " + nodeid.split("::")[0] + "\\n")
"""


def test_one_worker_runs_every_spark_file(tmp_path):
    """Two workers, two Spark files and two others (planned, not run: ``--setup-plan`` starts no
    Spark): the Spark files went to one worker, where each file its own unit split them."""
    (tmp_path / "where_plugin.py").write_text(WHERE)
    spark_files = ["tests/jobs/test_ingest_wikipedia.py", "tests/jobs/test_task_parquet.py"]
    others = ["tests/unit/test_quality.py", "tests/unit/test_wcep.py"]
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "--setup-plan"]
    files = [spark_files[0], others[0], spark_files[1], others[1]]  # the order of the command line
    argv += ["-p", "where_plugin", "-p", "no:cacheprovider", *files]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # this run's own
    env |= {"PYTHONPATH": str(tmp_path), "WHERE_OUT": str(tmp_path / "where.txt")}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for line in (tmp_path / "where.txt").read_text().splitlines():
        worker, path = line.split()
        workers.setdefault(path, set()).add(worker)
    assert set(workers) == {*spark_files, *others}
    assert len(workers[spark_files[0]] | workers[spark_files[1]]) == 1


def test_the_suite_runs_without_pytest_xdist():
    """The scheduler hook is pytest-xdist's: without the plugin (``-p no:xdist``, or xdist not
    installed) pytest refused the conftest's unknown hook before running anything."""
    test = "tests/unit/test_collection_ids.py::test_ids_with_escaped_bytes_or_text_are_refused_and_plain_ones_pass"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", test]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
