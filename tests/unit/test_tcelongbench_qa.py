"""S6/S8 parsers and checks: Question/Answer, the forecast rules, the Evidence verdict, the
(b)(c)(d) distractors, Background 2 sampling and the Plausible check on hand-made choice sets."""

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from udfs.embeddings import embed
from udfs.llm_parsing import ParseError
from udfs.tcelongbench import qa

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tcelongbench"


def test_parse_qa():
    got = qa.parse_qa(
        "Question: Where did the police stop the train? Answer: At Bicske.\nQuestion: x? Answer: y"
    )
    assert got == {"question": "Where did the police stop the train?", "answer": "At Bicske"}
    assert qa.parse_qa('question:  Who led the march?   answer: "Activists"')["answer"] == "Activists"
    for bad in (
        "",
        "Question: Where did the police stop the train Answer: At Bicske.",  # no question mark
        "Question: Where? Answer: here",  # too short a question
        "Question: Where did the police stop the train? Answer: .",
        "Where did the police stop the train? At Bicske.",
        "Question: Where did the police stop\nthe train? Answer: At Bicske",  # split over lines
    ):
        with pytest.raises(ParseError):
            qa.parse_qa(bad)


@pytest.mark.parametrize(
    ("question", "problems"),
    [
        ("What will Croatia do with its border after 2015-09-17?", []),
        ("Which country will receive the refugees by 2015-09-17?", []),
        ("How many people will cross in 2015-09-17?", []),
        ("What did Croatia do after 2015-09-17?", ["opener"]),
        ("What will Croatia do with its border next week?", ["no_day"]),
        ("What will Croatia do BEFORE 2015-09-17?", ["before"]),
        ("When will Croatia act, before 2015-09-18?", ["opener", "no_day", "before"]),
    ],
)
def test_forecast_question_rules(question, problems):
    assert qa.forecast_question_problems(question, "2015-09-17") == problems


def test_copied_example_detects_an_echoed_few_shot_question():
    from udfs.prompts import load_prompt

    template = load_prompt("tcelongbench.detail_qa").user_template
    echoed = "Why did the village council postpone the harvest festival?"  # real Gemma output
    assert qa.copied_example(echoed, template)
    assert qa.copied_example("why did the village  council postpone the harvest festival?", template)
    assert not qa.copied_example("Why did Croatia close its border crossings with Serbia?", template)


def test_parse_evidence():
    ok = qa.parse_evidence('The given answer is correct. "Police stopped the train at Bicske."')
    assert ok == {"evidence_pass": True, "evidence_sentence": "Police stopped the train at Bicske."}
    bad = qa.parse_evidence("The given answer may be wrong.\nSentence: The train went on to Vienna.")
    assert bad == {"evidence_pass": False, "evidence_sentence": "The train went on to Vienna."}
    echo = "The given answer is correct.\nThe one original sentence that supports it most strongly is:\nMines lie near the border.\nQuestion: x"
    assert qa.parse_evidence(echo)["evidence_sentence"] == "Mines lie near the border."
    same_line = qa.parse_evidence("The given answer may be wrong. Sentence: 'The train left.'")
    assert same_line["evidence_sentence"] == "The train left."
    for text in (
        "",
        "The answer is right.",
        "The given answer is correct.",
        "The given answer is correct.  \n\n ",
    ):
        with pytest.raises(ParseError):
            qa.parse_evidence(text)


def test_evidence_match():
    article = "Police stopped the train at Bicske on Thursday. Passengers refused to leave."
    assert qa.evidence_match("Police stopped the train at Bicske on Thursday.", article) == 1.0
    assert qa.evidence_match("The army closed the airport in the capital.", article) < 0.9


def test_parse_distractors():
    text = "Noising Answers:\n(b) At Gyor\n(c) At Keleti station.\n(d) In Vienna\n(e) extra"
    assert qa.parse_distractors(text) == {
        "distractor_b": "At Gyor",
        "distractor_c": "At Keleti station",
        "distractor_d": "In Vienna",
    }
    assert qa.parse_distractors("(a) At Bicske\n- (B) x\n* (c) y\n(d) z")["distractor_b"] == "x"
    for bad in (
        "",
        "(b) x\n(c) y",
        "(b) x\n(d) z\n(c) y",
        "(b) x\n(c) \n(d) z",
        "(b) x\n(b) y\n(c) z\n(d) w",
    ):
        with pytest.raises(ParseError):
            qa.parse_distractors(bad)


@given(st.text(max_size=300))
def test_qa_parsers_never_crash(text):
    for parse in (qa.parse_qa, qa.parse_evidence, qa.parse_distractors):
        with contextlib.suppress(ParseError):
            parse(text)


def test_captured_real_outputs_parse_or_fail_cleanly():
    for stage, parse in (
        ("detail_qa", qa.parse_qa),
        ("forecast_qa", qa.parse_qa),
        ("evidence", qa.parse_evidence),
        ("distractors", qa.parse_distractors),
    ):
        cases = json.loads((FIXTURES / f"{stage}.json").read_text())
        assert cases
        for case in cases:
            if case["ok"]:
                assert parse(case["text"]) == case["parsed"]
            else:
                with pytest.raises(ParseError):
                    parse(case["text"])


def test_background_two_comes_from_another_allowed_day_and_is_seeded():
    by_day = {1: ["a1", "a2"], 2: ["b1"], 3: ["c1"], 4: ["d1"]}
    picks = {qa.pick_background(by_day, 2, range(1, 4), seed) for seed in range(50)}
    assert {p[0] for p in picks} == {1, 3} and ("a1" in {p[1] for p in picks})
    assert qa.pick_background(by_day, 2, range(1, 4), 7) == qa.pick_background(by_day, 2, range(1, 4), 7)
    assert qa.pick_background(by_day, 1, [1], 0) is None


def sims_for(choices):
    v = embed(choices)
    return v @ v.T


def test_plausible_brief_on_hand_made_sets():
    good = [
        "At the town of Bicske",
        "At Keleti station in Budapest",
        "On the motorway to Vienna",
        "Near the Serbian fence",
    ]
    assert qa.plausible_problems(good, sims_for(good), "brief") == []
    duplicate = [*good[:3], "at the town of Bicske!"]
    assert "duplicate_choice" in qa.plausible_problems(duplicate, sims_for(duplicate), "brief")
    spread = [
        *good[:3],
        "Somewhere along a very long and winding road that leads from the capital to the border",
    ]
    assert qa.plausible_problems(spread, sims_for(spread), "brief") == ["length_spread"]
    similar = [*good[:3], "At the small town of Bicske"]
    assert qa.plausible_problems(similar, sims_for(similar), "brief") == ["too_similar"]


def test_plausible_paper_mode_compares_with_the_correct_answer_only():
    sims = np.eye(4)
    sims[1, 2] = sims[2, 1] = 0.95  # two distractors alike: fine in paper mode, not in brief mode
    choices = ["one two three", "four five six", "seven eight nine", "ten eleven twelve"]
    assert qa.plausible_problems(choices, sims, "paper") == []
    assert qa.plausible_problems(choices, sims, "brief") == ["too_similar"]
    sims[0, 3] = sims[3, 0] = 0.81
    assert qa.plausible_problems(choices, sims, "paper") == ["too_similar"]
    long = [*choices[:3], "w " * 13]
    assert qa.plausible_problems(long, np.eye(4), "paper") == ["length_spread"]  # 13 - 3 = 10 is not < 10
    assert qa.plausible_problems(choices[:3], np.eye(3), "brief") == ["not_four_choices"]
    with pytest.raises(ValueError):
        qa.plausible_problems(choices, sims, "loose")
