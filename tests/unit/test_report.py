"""Run summaries: the combined table shows parse failures of LLM stages apart from other rejects."""

import io
import logging
import sys

from udfs.report import Progress, RunSummary, combined_table, parse_failures, progress


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


def test_progress_in_a_log_is_a_line_per_tenth_not_a_bar(caplog, monkeypatch):
    """A log (stderr no terminal): no bar, one line at every tenth of the work."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    log = logging.getLogger("augury.test")
    caplog.set_level(logging.INFO, logger="augury.test")
    bar = Progress("stage=embed rows", 1_000, log)
    for _ in range(143):
        bar.update(7)  # 1,001 rows: the last update passes the total
    bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 10 and lines[0] == "stage=embed rows: 105/1000" and lines[-1].endswith("1001/1000")
    caplog.clear()
    assert list(progress(["a", "b", "c"], "windows", log)) == ["a", "b", "c"]
    assert [r.getMessage() for r in caplog.records] == ["windows: 1/3", "windows: 2/3", "windows: 3/3"]
    caplog.clear()
    unknown = Progress("passages", None, log)
    unknown.update(5)
    unknown.update(0)
    unknown.update(5)
    assert [r.getMessage() for r in caplog.records] == ["passages: 5/?", "passages: 10/?"]
