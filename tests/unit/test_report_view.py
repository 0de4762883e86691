"""The report's pure pieces: the funnel of a build from its card and rejected counts, seeded
samples spread over tasks, the quality rows, and SVG that parses with every count in a title."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from udfs import svg_charts
from udfs.report_view import fmt, funnel, funnel_svg, interval, quality_rows, sample_ids

CARD = {
    "llm_cost": {
        "stages": {
            "daily_oracle/filter": {
                "rows": 10,
                "failed": 3,
                "failures_by_reason": {"parse_error": 2, "engine_error": 1},
            },
            "daily_oracle/qa": {"rows": 5, "failed": 0, "failures_by_reason": {}},
        }
    }
}
REJECTED = {
    ("filter", "question", "filter_total_below_13"): 4,
    ("filter", "question", "parse_error"): 2,
    ("prefilter", "article", "language"): 7,
}


def test_funnel_has_a_step_per_llm_stage_and_per_dropping_step():
    steps = funnel(CARD, REJECTED, items=11)
    table = [(s.stage, s.unit, s.rows_in, s.kept, s.rejected) for s in steps]
    assert table == [
        ("filter", "LLM request", 10, 7, {"parse_error": 2, "engine_error": 1}),
        ("filter", "question", None, None, {"filter_total_below_13": 4, "parse_error": 2}),
        ("prefilter", "article", None, None, {"language": 7}),
        ("qa", "LLM request", 5, 5, {}),
        ("eval_items", "item", None, 11, {}),
    ]
    assert funnel(CARD, {}, items=None)[-1].stage == "qa"  # no eval_items table: no last step


def test_funnel_svg_parses_and_titles_every_count():
    svg = funnel_svg(funnel(CARD, REJECTED, items=11))
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    for expected in (
        "kept: 7",
        "parse_error: 2",
        "engine_error: 1",
        "filter_total_below_13: 4",
        "language: 7",
        "kept: 11",
    ):
        assert expected in titles
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "10 in, 7 kept" in labels and "6 dropped" in labels and "11 written" in labels


def test_sample_is_seeded_bounded_and_spread_over_groups():
    keyed = [("mc", f"m{i:03d}") for i in range(100)] + [("tf", f"t{i}") for i in range(3)]
    first = sample_ids(keyed, 10, seed=7)
    assert first == sample_ids(list(reversed(keyed)), 10, seed=7)  # input order does not matter
    assert len(first) == 10 and len(set(first)) == 10
    assert sum(i.startswith("t") for i in first) == 3  # the small task shows all it has
    assert sample_ids(keyed, 10, seed=8) != first
    assert sorted(sample_ids(keyed[:4], 10, seed=1)) == sorted(i for _, i in keyed[:4])
    assert sample_ids([], 5, seed=0) == []


def test_quality_rows_in_a_fixed_order_with_shares_and_spreads():
    section = {
        "tasks": {"tf": 4},
        "items": 4,
        "near_duplicate_rate": 0.125,
        "gold_option_position": {"a": {"n": 1, "share": 0.25}, "b": {"n": 3, "share": 0.75}},
        "horizon_days": {"max": 9.0, "median": 2.5, "min": 1.0},  # as stored: keys sorted
        "question_words": None,
        "something_new": 3,
    }
    rows = quality_rows(section)
    assert rows == [
        ("items", "4"),
        ("items per task", "tf 4"),
        ("near-duplicate rate", "12.5%"),
        ("gold option position", "a 1 (25%), b 3 (75%)"),
        ("question length (words)", "–"),
        ("horizon t_resolve − t_cut (days)", "min 1.00 · median 2.50 · max 9.00"),
        ("something_new", "3"),
    ]


def test_values_and_intervals_as_text():
    assert fmt(None) == fmt(math.nan) == "–"
    assert fmt(1234) == "1,234" and fmt(0.12345) == "0.123" and fmt(True) == "yes"
    assert interval(0.5, 0.25, 0.75) == "0.500 [0.250, 0.750]"
    assert interval(0.5, math.nan, math.nan) == "0.500" and interval(None, 0, 1) == "–"


def test_interval_and_line_charts_parse_and_clamp():
    svg = svg_charts.intervals(
        [svg_charts.Interval("a <b>", 0.4, 0.1, 1.7), svg_charts.Interval("c", 0.9, None, None)]
    )
    root = ET.fromstring(svg)
    circles = list(root.iter("{http://www.w3.org/2000/svg}circle"))
    assert len(circles) == 2 and circles[0][0].text == "a <b>: 0.400 [0.100, 1.700]"
    line = next(root.iter("{http://www.w3.org/2000/svg}line"))
    assert float(line.get("x1")) == 260.0  # the axis starts after the labels
    whisker = next(e for e in root.iter("{http://www.w3.org/2000/svg}line") if e.get("stroke") == "#555")
    assert float(whisker.get("x2")) == 260.0 + 360.0  # 1.7 clamped to the axis end (width 640)
    lines = ET.fromstring(svg_charts.lines({"m": [("2024-01", 0.5), ("2024-02", None), ("2024-03", 1.0)]}))
    points = list(lines.iter("{http://www.w3.org/2000/svg}circle"))
    assert len(points) == 2  # the missing month has no point
