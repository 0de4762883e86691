"""The declared answer forms of the TCELongBench prompts (``udfs.tcelongbench.outputs``): the
prompt files declare them for their own budgets, every string a form allows is accepted by its
stage's parser after the prompt's answer prefix (property tests over strings drawn from the
regex) and holds no stop string, and the stages narrow the forms to ``--max-new-tokens``."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.llm.assemble import answer_turn
from pipelines.llm.attempts import fit
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.stages import FORECAST_FORM, llm_stages
from udfs.llm_parsing import ParseError, check_output
from udfs.prompts import load_prompt
from udfs.tcelongbench import order, outline, outputs, qa, verify

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PARSERS = {
    "article_summary": outline.parse_summary,
    "day_summary": outline.parse_summary,
    "key_points": outline.parse_key_points,
    "detail_qa": qa.parse_qa,
    "forecast_qa": qa.parse_qa,
    "evidence": qa.parse_evidence,
    "distractors": qa.parse_distractors,
    "entities": order.parse_entities,
    "forecast_check": verify.parse_votes,
    "order_check": verify.parse_votes,
}
NO_PREFIX = ("article_summary", "day_summary")  # their parsers read the generated text alone


def _parse(name: str, text: str) -> dict:
    prompt = load_prompt(f"tcelongbench.{name}")
    parser = PARSERS[name] if name in NO_PREFIX else answer_turn(PARSERS[name], prompt.answer_prefix)
    return parser(text)


@pytest.mark.parametrize("name", sorted(outputs.FORMS))
def test_prompt_files_declare_the_forms_of_their_own_budgets(name):
    prompt = load_prompt(f"tcelongbench.{name}")
    assert prompt.output == {"regex": outputs.FORMS[name](prompt.sampling["max_tokens"])}


@pytest.mark.parametrize("tokens", [12, 32, 300])
@pytest.mark.parametrize("name", sorted(outputs.FORMS))
def test_every_declared_answer_parses_and_holds_no_stop_string(name, tokens):
    stops = load_prompt(f"tcelongbench.{name}").sampling.get("stop", [])

    @given(st.from_regex(outputs.FORMS[name](tokens), fullmatch=True))
    @FUZZ
    def check(text):
        assert not any(s in text for s in stops)
        fields = _parse(name, text)
        assert all(v not in (None, "") for v in fields.values())

    check()


@given(st.from_regex(outputs.forecast_regex(32, "2015-09-17"), fullmatch=True))
@FUZZ
def test_declared_forecast_questions_pass_the_hard_rules_but_before(text):
    question = _parse("forecast_qa", text)["question"]
    assert set(qa.forecast_question_problems(question, "2015-09-17")) <= {"before"}


@pytest.mark.parametrize("word", ["G20", "13,000.", "2015-09-17", "1990s", "24-year-old", "COVID-19", "3.5%"])
def test_words_may_hold_short_numbers(word):
    check_output({"regex": outputs.FORMS["distractors"](80)}, f" {word}\n(c) {word} x\n(d) {word} y")


def test_the_shapes_follow_the_budget():
    assert "\\n\\*" not in outputs.key_points_regex(32)  # one point of up to 15 words
    assert outputs.key_points_regex(48).count("\\n\\*") == 1  # two points
    assert "{1,8}" in outputs.entities_regex(80) and "{1,4}" in outputs.entities_regex(32)
    with pytest.raises(ParseError):  # a second point does not fit 32 tokens
        check_output({"regex": outputs.key_points_regex(32)}, " a b c\n* d e f")
    check_output({"regex": outputs.key_points_regex(32)}, " " + " ".join(["word"] * 15))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("article_summary", " Too short here."),
        ("article_summary", " First paragraph is long enough.\n\nSecond one."),
        ("key_points", " Fine point here\n*\n* Another good point"),
        ("detail_qa", " Who? Answer: X"),
        ("detail_qa", " Why was the army forced to send:A.1000,000,000,B.? Answer: X"),
        ("detail_qa", " Who stopped the train? Answer: "),
        ("detail_qa", " Who stopped the train? Answer: The police\nMore"),
        ("evidence", " is correct."),
        ("evidence", " is right. The train stopped at Bicske."),
        ("evidence", " is correct. The train stopped at Bicske"),
        ("distractors", " One\n(d) Two\n(c) Three"),
        ("distractors", " 100000000000000\n(c) 1\n(d) 2"),  # a digit run: one token a digit
        ("entities", "\nMONEY: 5 dollars"),
        ("forecast_check", " D. Q2: A"),
        ("order_check", " A Q2: A"),
    ],
)
def test_malformed_answers_fail_the_declared_form(name, text):
    with pytest.raises(ParseError):
        check_output({"regex": outputs.FORMS[name](80)}, text)


@pytest.mark.parametrize(
    "text",
    [
        " What will Croatia do with its borders after 2015-09-18? Answer: Close them",  # another day
        " When will Croatia reopen its borders after 2015-09-17? Answer: Soon",  # no allowed opener
        " What will Croatia do after 2015-09-17 with its borders? Answer: Close them",  # day not last
    ],
)
def test_forecast_form_holds_the_rows_day_and_opener(text):
    with pytest.raises(ParseError):
        check_output(json.loads(outputs.forecast_output(80, "2015-09-17")), text)
    ok = " What will Croatia do with its borders after 2015-09-17? Answer: Close them"
    check_output(json.loads(outputs.forecast_output(80, "2015-09-17")), ok)


def test_stages_narrow_the_forms_to_the_cap():
    demo = {name: fit(stage, 32) for name, stage in llm_stages(Config(root="r")).items()}
    full = {name: fit(stage, None) for name, stage in llm_stages(Config(root="r")).items()}
    for stage in full.values():
        assert stage.structured == stage.prompt.output, stage.name
    assert demo["key_points"].structured == {"regex": outputs.key_points_regex(32)}
    assert demo["order_votes"].structured == {"regex": outputs.VOTES}
    assert demo["forecast_qa"].structured_column == FORECAST_FORM
    assert re.search(r"\{1,\d+\}", demo["forecast_qa"].structured["regex"])
