"""Run summaries: the combined table shows parse failures of LLM stages apart from other rejects."""

from udfs.report import RunSummary, combined_table, parse_failures


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
