"""Run summaries: the combined table shows parse failures of LLM stages apart from other rejects."""

import io
import logging
import re
import subprocess
import sys
from pathlib import Path

from udfs.report import Progress, RunSummary, combined_table, duration, parse_failures, progress

ROOT = Path(__file__).resolve().parents[2]


def test_parse_failures_are_counted_for_llm_stages_only():
    stage = RunSummary(name="b/summary", rows_read=10, rows_written=6, metrics={"requests_total": 10})
    stage.reject("parse: no keypoint", 3)
    stage.reject("engine: timeout")
    step = RunSummary(name="b/filter", rows_read=5, rows_written=4)
    step.reject("parse_like_but_a_rule")
    assert parse_failures(stage) == 3
    lines = combined_table([stage, step], "title").splitlines()
    header = lines[2].split()
    assert header[:6] == ["stage", "read", "written", "rejected", "parse", "fail"]
    summary_line, filter_line = lines[4].split(), lines[5].split()
    assert summary_line[1:5] == ["10", "6", "4", "3"]
    assert filter_line[1:4] == ["5", "4", "1"] and filter_line[4] == "yes"  # no parse column for steps


def test_the_last_line_counts_requests_computed_and_engine_starts():
    first = RunSummary(name="b/a", metrics={"requests_total": 4, "requests_computed": 4, "engine_starts": 1})
    later = RunSummary(name="b/b", metrics={"requests_total": 9, "requests_computed": 7, "engine_starts": 0})
    assert (
        combined_table([first, later], "t")
        .splitlines()[-1]
        .startswith("LLM requests computed: 11; engine starts: 1")
    )
    steps_only = combined_table([RunSummary(name="b/filter")], "t")
    assert "engine starts" not in steps_only and steps_only.splitlines()[-1].startswith("---")


def test_progress_in_a_log_is_a_line_per_tenth_with_rate_and_eta(caplog, monkeypatch):
    """A log (stderr no terminal): no bar, one line at every tenth of the work, with its rate and
    the time left."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    log = logging.getLogger("augury.test")
    caplog.set_level(logging.INFO, logger="augury.test")
    bar = Progress("stage=embed table=articles", 1_000, log, "articles")
    for _ in range(143):
        bar.update(7)  # 1,001 rows: the last update passes the total
    bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 10
    line = re.compile(r"stage=embed table=articles: (\d+)/1000 articles \((\d+)%\), [\d.e+]+/s, ETA (.+)")
    found = [line.fullmatch(m) for m in lines]
    assert all(found), lines
    assert [int(m[1]) for m in found][:2] == [105, 203] and found[-1][1] == "1001"
    assert [int(m[2]) for m in found] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert found[-1][3] == "0 s"
    caplog.clear()
    assert list(progress(["a", "b", "c"], "windows", log)) == ["a", "b", "c"]
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "windows: 1/3 items",
        "windows: 2/3 items",
        "windows: 3/3 items",
    ]


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (0.4, 42, 200, 3599.6, 7500)] == [
        "0 s",
        "42 s",
        "3 min 20 s",
        "1 h 00 min",
        "2 h 05 min",
    ]


def test_augury_logs_reach_stderr_whatever_the_root_logger_was_set_to(tmp_path):
    """As Ray's workers do: the root logger at WARNING with a handler of its own. An entry point's
    INFO lines still come out, once each."""
    script = (
        "import logging, sys\n"
        "root = logging.getLogger()\n"
        "handler = logging.StreamHandler(sys.stderr)\n"
        "handler.setLevel(logging.WARNING)\n"
        "root.addHandler(handler)\n"
        "root.setLevel(logging.WARNING)\n"
        "from udfs.report import log_to_stderr\n"
        "logging.basicConfig(level=logging.INFO)  # a no-op: the root has a handler\n"
        "log_to_stderr()\n"
        "log_to_stderr()  # twice: still one handler\n"
        "logging.getLogger('augury.index').info('stage=embed 1/10')\n"
        "logging.getLogger('augury.index').warning('stage=write slow')\n"
        "logging.getLogger('other').info('not ours')\n"
    )
    err = tmp_path / "stderr.log"
    with err.open("w") as stream:
        subprocess.run([sys.executable, "-c", script], stderr=stream, check=True, cwd=ROOT)
    lines = err.read_text().splitlines()
    assert sum("augury.index: stage=embed 1/10" in line for line in lines) == 1
    assert sum("stage=write slow" in line for line in lines) == 1
    assert not any("not ours" in line for line in lines)
