"""S2–S5: summary and key-point parsers (captured real outputs and malformed ones), the
key-point dedup and noise filter on planted points with the real MiniLM, the gold-article choice."""

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from udfs.embeddings import embed
from udfs.llm_parsing import ParseError
from udfs.tcelongbench import outline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tcelongbench"


def test_parse_summary_keeps_first_paragraph():
    assert outline.parse_summary(" Police stopped a train west of Budapest.\n\nSummary 2: x")["summary"] == (
        "Police stopped a train west of Budapest."
    )
    for bad in ("", "   ", "Too short.", "\n\n  \n"):
        with pytest.raises(ParseError):
            outline.parse_summary(bad)


def test_parse_key_points_reads_bullets_after_the_header():
    text = "Key Points:\n* Croatia closed seven border crossings.\n-  Serbia protested.\n*\nnot a point\n• Third."
    assert outline.parse_key_points(text)["points"] == [
        "Croatia closed seven border crossings.",
        "Serbia protested.",
        "Third.",
    ]
    for bad in ("", "Key Points:", "Croatia closed seven border crossings.", "*\n-  \n"):
        with pytest.raises(ParseError):
            outline.parse_key_points(bad)


@given(st.text(max_size=300))
def test_outline_parsers_never_crash(text):
    for parse in (outline.parse_summary, outline.parse_key_points):
        with contextlib.suppress(ParseError):
            parse(text)


def captured(stage: str) -> list[dict]:
    return json.loads((FIXTURES / f"{stage}.json").read_text())


def test_captured_real_outputs_parse_or_fail_cleanly():
    """Real Gemma 3 270M outputs (with the answer prefix the stage adds): each parses to what was
    recorded, or fails with ParseError."""
    for stage, parse in (
        ("article_summary", outline.parse_summary),
        ("key_points", outline.parse_key_points),
    ):
        cases = captured(stage)
        assert cases
        for case in cases:
            if case["ok"]:
                assert parse(case["text"]) == case["parsed"]
            else:
                with pytest.raises(ParseError):
                    parse(case["text"])


# --------------------------------------------------------------------------- dedup and noise
STORY = [
    "Hungary closed its border with Serbia at Roszke on Tuesday.",  # 0, day 1, j=1
    "Hungarian police arrested 60 people who crossed the Serbian border fence.",  # 1, day 1, j=2
    "Hungary shut its border with Serbia at Roszke on Tuesday.",  # 2, day 1, j=3: dup of 0 (same date, higher j)
    "Croatia opened its border to refugees coming from Serbia.",  # 3, day 2
    "Police in Hungary arrested sixty people who had crossed the fence on the Serbian border.",  # 4, day 2: dup of 1
    "Austria sent soldiers to its border with Hungary.",  # 5, day 3
]


def test_dedup_drops_planted_near_duplicates_including_same_date_higher_j():
    decisions = outline.filter_key_points(embed(STORY), 0.8, 0.2)
    statuses = [d["status"] for d in decisions]
    assert statuses == ["kept", "kept", "dup", "kept", "dup", "kept"], [
        d["max_sim_earlier"] for d in decisions
    ]
    assert decisions[2]["dup_of"] == 0 and decisions[4]["dup_of"] == 1
    assert decisions[2]["max_sim_earlier"] > 0.8 and decisions[4]["max_sim_earlier"] > 0.8
    assert all(d["max_sim_earlier"] <= 0.8 for d in decisions[1:] if d["status"] == "kept")


def test_distinct_points_are_kept_and_an_unrelated_sentence_is_noise():
    points = [STORY[0], STORY[1], STORY[3], STORY[5], "Thank you for reading, have a nice day!"]
    decisions = outline.filter_key_points(embed(points), 0.8, 0.2)
    assert [d["status"] for d in decisions] == ["kept", "kept", "kept", "kept", "noise"]
    assert decisions[-1]["mean_sim_kept"] < 0.2 <= min(d["mean_sim_kept"] for d in decisions[:-1])


def test_filter_on_hand_made_vectors_is_greedy_and_ignores_dropped_points():
    # b duplicates a; c is close to b (dropped) but not to a, so c is compared with kept a only.
    a = np.array([1.0, 0.0, 0.0])
    b = np.array([0.9, 0.43589, 0.0])
    c = np.array([0.6, 0.8, 0.0])
    decisions = outline.filter_key_points(np.vstack([a, b, c]), 0.8, 0.2)
    assert [d["status"] for d in decisions] == ["kept", "dup", "kept"]
    single = outline.filter_key_points(a.reshape(1, -1), 0.8, 0.2)
    assert single == [{"status": "kept", "dup_of": None, "max_sim_earlier": None, "mean_sim_kept": None}]


def test_gold_article_is_the_most_similar_article_of_the_date():
    points = embed(["Croatia closed seven of its eight border crossings with Serbia."])
    articles = embed(
        [
            "Croatia shut most of its road border crossings with Serbia after thousands arrived.",
            "Mexican parents of 43 missing students met the president.",
            "Croatia closed seven of its eight road crossings with Serbia on Thursday.",
        ]
    )
    (best,) = outline.choose_gold_articles(points, articles, [[0, 1]])
    assert best[0] == 0
    (best,) = outline.choose_gold_articles(points, articles, [[1, 2, 0]])
    assert best[0] == 2 and best[1] > 0.8
    with pytest.raises(ValueError):
        outline.choose_gold_articles(points, articles, [[]])
