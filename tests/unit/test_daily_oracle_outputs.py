"""The answer forms the Daily Oracle prompts declare: the prompt files hold the full-size builds,
every answer a form allows parses as the stage parses it (the prompt's answer prefix plus the
text; property tests over the regexes), answers outside a form fail the check, and the forms
fitted to a token cap stay small enough to finish."""

import datetime as dt
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.daily_oracle.stages import PARSERS, qa_form, stage
from pipelines.llm.assemble import answer_turn
from pipelines.llm.attempts import fit
from udfs.daily_oracle import outputs
from udfs.daily_oracle.parsing import is_no_new_event
from udfs.daily_oracle.questions import normalise_yes_no, time_element
from udfs.daily_oracle.selection import Pick
from udfs.daily_oracle.units import Article, Question, check_question
from udfs.llm_parsing import ParseError, check_output
from udfs.prompts import load_prompt

FULL = {
    "summary": outputs.summary_output(),
    "qa": outputs.qa_output(),
    "distractors": outputs.distractors_output(),
    "filter": outputs.filter_output(),
}
SMALL = {
    "summary": outputs.summary_output(10, 20),
    "qa": outputs.qa_output(12, 4),
    "distractors": outputs.distractors_output(4),
    "filter": outputs.filter_output(0),
}
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(FULL))
def test_prompt_files_declare_the_full_size_forms(name):
    assert load_prompt(f"daily_oracle.{name}").output == FULL[name]


def _parse(name: str, form: dict, text: str) -> dict:
    """Check ``text`` against ``form``, then parse it as the stage does (prefix + text)."""
    check_output(form, text)
    parser, _ = PARSERS[name]
    return answer_turn(parser, load_prompt(f"daily_oracle.{name}").answer_prefix)(text)


def _answers(name: str) -> st.SearchStrategy[tuple[dict, str]]:
    forms = st.sampled_from([FULL[name], SMALL[name]])
    return forms.flatmap(lambda f: st.tuples(st.just(f), st.from_regex(f["regex"], fullmatch=True)))


@FAST
@given(_answers("summary"))
def test_every_declared_summary_parses(answer):
    form, text = answer
    parsed = _parse("summary", form, text)
    assert parsed["keypoint"] and not parsed["summary"].lower().startswith("summary")


@FAST
@given(_answers("qa"))
def test_every_declared_qa_answer_parses(answer):
    form, text = answer
    parsed = _parse("qa", form, text)
    assert [normalise_yes_no(a) for a in parsed["answers"][:2]] == ["Yes", "No"]
    assert all(q.endswith("?") and time_element(q) for q in parsed["questions"])
    assert parsed["questions"][0].startswith("Will") and parsed["questions"][1].startswith("Will")


@FAST
@given(_answers("distractors"))
def test_every_declared_distractor_set_parses(answer):
    form, text = answer
    assert len(_parse("distractors", form, text)["distractors"]) == 6


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_answers("filter"))
def test_every_declared_filter_answer_scores_all_four_questions(answer):
    form, text = answer
    parsed = _parse("filter", form, text)
    assert parsed["filter_errors"] == [None] * 4
    assert all(len(s) == 7 and set(s) <= {0, 1, 2} for s in parsed["filter_scores"])


def test_the_no_new_event_marker_is_a_declared_keypoint():
    text = " The article reviews a concert\nKeypoint: No new event reported."
    assert is_no_new_event(_parse("summary", FULL["summary"], text)["keypoint"])


_QA = (
    " Will it rain by May 2023?\nAnswer 1: Yes.\nQuestion 2: Will it snow in May 2023?\nAnswer 2: No.\n"
    "Question 3: What will fall in May 2023?\nAnswer 3: Rain\nQuestion 4: Who will vote in May 2023?\n"
    "Answer 4: 'Seven'"
)


def test_a_well_formed_qa_answer_keeps_its_time_elements():
    check_output(FULL["qa"], _QA.replace("Will it rain", "Will Gov. J.B. Smith resign"))
    check_output(FULL["qa"], _QA.replace("Will it rain", "Will it rain on Gov."))  # a dot before the time
    parsed = _parse("qa", FULL["qa"], _QA)
    assert [time_element(q).phrase for q in parsed["questions"]] == ["May 2023"] * 4


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("summary", " Council votes: ban passes\nKeypoint: The council bans blowers."),  # colon in summary
        ("summary", " Council votes on a ban"),
        ("qa", " Will it rain in May 2023?\nAnswer 1: No.\nQuestion 2: Will it snow in May 2023?\nAnswer 2: No."),
        ("qa", _QA.replace(" Will it rain", " It will rain")),
        ("qa", _QA.replace("by May 2023", "in the coming weeks")),  # no time element
        ("qa", _QA.replace("Will it rain", "Will ...")),
        ("qa", _QA.replace("Will it rain", "Will be (or Who will, Where will)")),  # the template
        ("qa", _QA.replace("Will it rain", "Will it rain. Answer 1: Yes")),
        ("distractors", "\n(b) Five\n(c) Nine\n(d) Two"),
        ("distractors", "\n(b) Five\n(d) Nine\n(c) Two\nNoising Answers 2:\n(b) 1\n(c) 2\n(d) 3"),
        ("filter", "\n## Correctness\n- Reasoning: fine\n- Point: 2"),
    ],
)  # fmt: skip
def test_answers_outside_the_declared_form_fail_the_check(name, text):
    with pytest.raises(ParseError):
        check_output(FULL[name], text)


def _worst_case_tokens(form: dict) -> float:
    width = re._parser.parse(form["regex"]).getwidth()[1]  # type: ignore[attr-defined]
    return width / outputs.CHARS_PER_TOKEN


@pytest.mark.parametrize(("name", "budget"), [("summary", 32), ("summary", 96), ("qa", 128), ("qa", 256),
                                             ("distractors", 64), ("distractors", 128), ("filter", 400),
                                             ("filter", 1024)])  # fmt: skip
def test_fitted_forms_finish_within_their_budget(name, budget):
    form = outputs.fitted(f"daily_oracle.{name}", budget)
    assert _worst_case_tokens(form) <= budget * 1.1


def test_a_small_cap_drops_the_filter_reasoning_and_stages_send_the_fitted_forms():
    assert "Reasoning" not in outputs.fitted("daily_oracle.filter", 400)["regex"]
    assert "Reasoning" in outputs.fitted("daily_oracle.filter", 1024)["regex"]
    assert fit(stage("qa"), None).structured is None and fit(stage("qa"), 1024).structured is None
    assert fit(stage("qa"), 160).structured == outputs.fitted("daily_oracle.qa", 160)
    assert fit(stage("category"), 16).structured is None


def test_a_wrong_tf_answer_from_an_unenforcing_backend_is_still_rejected_by_the_rule():
    day = dt.date(2022, 9, 15)
    article = Article({"article_id": "a"}, day, Pick("a", "random", 1), 1)
    question = Question(article, 2, "Will officials withdraw the plan by September 2022?", "Yes.")
    rejection = check_question(question, "raw answer")
    assert rejection is not None and rejection.reason == "tf_answer_mismatch"


def test_an_article_s_qa_form_names_its_own_month():
    form = json.loads(qa_form("September 2022", 160))
    assert form == outputs.qa_form("September 2022", 160)
    check_output(form, _QA.replace("May 2023", "September 2022"))
    with pytest.raises(ParseError):
        check_output(form, _QA)  # another month
    assert json.loads(qa_form("September 2022", 1024)) == outputs.qa_output(month_year="September 2022")
    assert stage("qa").structured_column == "qa_form"
