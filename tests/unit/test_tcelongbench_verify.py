"""S8 voting: the Q1/Q2 parser, all 9 letter pairs of each check, and every 3-round pattern for
verify_min_pass 2 and 3."""

import contextlib
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from udfs.llm_parsing import ParseError
from udfs.tcelongbench import verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tcelongbench"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Q1: A. Q2: B", {"q1": "A", "q2": "B"}),
        ("Q1: (c)\nQ2: a.", {"q1": "C", "q2": "A"}),
        ("Q1. B Q2) A", {"q1": "B", "q2": "A"}),
        ("Q1: A. Q2: B. Q1: C", {"q1": "A", "q2": "B"}),
    ],
)
def test_parse_votes(text, expected):
    assert verify.parse_votes(text) == expected


@pytest.mark.parametrize("text", ["", "Q1: A.", "Q2: B", "Q1: D. Q2: E", "Q1: Yes. Q2: No", "A, B"])
def test_parse_votes_rejects(text):
    with pytest.raises(ParseError):
        verify.parse_votes(text)


@given(st.text(max_size=200))
def test_parse_votes_never_crashes(text):
    with contextlib.suppress(ParseError):
        verify.parse_votes(text)


@pytest.mark.parametrize(("q1", "q2"), list(itertools.product("ABC", repeat=2)))
def test_round_rule_for_all_nine_pairs(q1, q2):
    assert verify.round_passes(verify.FORECASTING, q1, q2) is ((q1, q2) == ("A", "B"))
    assert verify.round_passes(verify.STORY_TEMPORAL, q1, q2) is ((q1, q2) == ("A", "A"))


def test_forecasting_passes_on_a_b_not_on_a_a_and_unparsed_fails():
    assert verify.round_passes(verify.FORECASTING, "A", "B")
    assert not verify.round_passes(verify.FORECASTING, "A", "A")
    assert not verify.round_passes(verify.STORY_TEMPORAL, None, None)


@pytest.mark.parametrize("pattern", list(itertools.product([True, False], repeat=3)))
@pytest.mark.parametrize("min_pass", [2, 3])
def test_vote_over_every_three_round_pattern(pattern, min_pass):
    assert verify.vote(pattern, min_pass) is (sum(pattern) >= min_pass)


def test_captured_real_votes_parse_or_fail_cleanly():
    path = FIXTURES / "votes.json"
    cases = json.loads(path.read_text())
    assert cases
    for case in cases:
        if case["ok"]:
            assert verify.parse_votes(case["text"]) == case["parsed"]
        else:
            with pytest.raises(ParseError):
                verify.parse_votes(case["text"])
