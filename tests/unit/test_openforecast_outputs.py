"""The answer forms the OpenForecast prompts declare: the prompt files hold the full-size builds,
every answer a form allows parses (property tests over the regexes and the JSON schema), the
parsers still reject malformed answers from backends that enforce nothing, and the forms fitted
to a token cap stay small enough to finish."""

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.llm.attempts import answer_budget, below_cap, fit
from pipelines.openforecast.stages import parse_optional_date, parse_required_date, timeline_stage
from udfs.llm_parsing import ParseError, check_output
from udfs.openforecast import outputs, questions, timeline
from udfs.openforecast.structured import ARGUMENTS, load, parse_structured
from udfs.prompts import load_prompt

TIMELINE_PROMPTS = ("extract_news", "extract_wiki", "complement", "merge", "adjust")
FULL = {
    "page_date": outputs.date_output(unknown=False),
    "event_time": outputs.date_output(unknown=True),
    **{name: outputs.timeline_output() for name in TIMELINE_PROMPTS},
    "event_struct": outputs.struct_output(),
    "mcnc_negatives": outputs.negatives_output(),
    "mcac_question": outputs.mcac_output(),
}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("name", sorted(FULL))
def test_prompt_files_declare_the_full_size_forms(name):
    assert load_prompt(f"openforecast.{name}").output == FULL[name]


def _matches(form: dict, text: str) -> str:
    check_output(form, text)
    return text


def _regex_answers(form: dict) -> st.SearchStrategy[str]:
    return st.from_regex(form["regex"], fullmatch=True)


@FAST
@given(_regex_answers(outputs.date_output(unknown=False)))
def test_every_declared_page_date_parses(text):
    assert parse_required_date(_matches(outputs.date_output(unknown=False), text))["ts"]


@FAST
@given(_regex_answers(outputs.date_output(unknown=True)))
def test_every_declared_event_time_parses(text):
    ts = parse_optional_date(_matches(outputs.date_output(unknown=True), text))["ts"]
    assert (ts is None) == ("Unknown" in text)


@FAST
@given(st.sampled_from([outputs.timeline_output(), outputs.timeline_output(5, 40)]).flatmap(_regex_answers))
def test_every_declared_timeline_parses(text):
    events = timeline.parse_timeline(text)["events"]
    assert len(events) <= outputs.TIMELINE_ITEMS


@FAST
@given(st.lists(st.from_regex(r"[A-Za-z][^\n]{0,30}", fullmatch=True), min_size=1, max_size=6))
def test_every_declared_reordering_parses_and_copies_items(items):
    items = [" ".join(i.split()) for i in items]
    form = outputs.reorder_output(items)
    reordered = list(reversed(items))
    text = " " + "\n".join(f"{k}. {e}" for k, e in enumerate(reordered, 1))[3:]
    events = timeline.parse_timeline(_matches(form, text))["events"]
    assert timeline.is_permutation(list(dict.fromkeys(items)), events) or len(set(items)) < len(items)


def test_a_reordering_form_refuses_foreign_or_missing_items():
    form = outputs.reorder_output(["Storm hits (south).", "Aid arrives."])
    check_output(form, " Aid arrives.\n2. Storm hits (south).\n")
    for text in (" Aid arrives.", " Aid arrives.\n2. Rain falls.", " Aid arrives.\n2. Storm hits."):
        with pytest.raises(ParseError):
            check_output(form, text)


@FAST
@given(st.sampled_from([outputs.negatives_output(), outputs.negatives_output(12)]).flatmap(_regex_answers))
def test_every_declared_negative_triple_parses(text):
    assert len(questions.parse_negatives(text)["negatives"]) == 3


@FAST
@given(st.sampled_from([outputs.mcac_output(), outputs.mcac_output(10, 4)]).flatmap(_regex_answers))
def test_every_declared_mcac_answer_parses(text):
    parsed = questions.parse_mcac(text)
    assert parsed["question"] and parsed["true_answer"] and len(parsed["wrong_answers"]) == 3


def _label(chars: int) -> st.SearchStrategy[str]:
    return st.from_regex(rf"[A-Za-z][A-Za-z0-9 ,.'-]{{0,{chars - 1}}}", fullmatch=True)


def _structured_events(chars: int, items: int) -> st.SearchStrategy[list]:
    value = st.one_of(st.none(), st.text(max_size=chars))
    event = st.fixed_dictionaries(
        {a: _label(chars) if a in ("type", "trigger") else value for a in ARGUMENTS},
        optional={"extra": st.fixed_dictionaries({}, optional={"content": st.text(max_size=chars)})},
    )
    return st.lists(event, min_size=1, max_size=items)


@FAST
@given(_structured_events(outputs.STRUCT_CHARS, outputs.STRUCT_ITEMS))
def test_every_declared_structured_answer_parses(events):
    text = json.dumps(events)
    parsed = load(parse_structured(_matches(outputs.struct_output(), text))["structured_json"])
    assert len(parsed) == len(events)
    assert [e["type"] for e in parsed] == [" ".join(e["type"].split()) for e in events]


def test_structured_labels_named_like_placeholders_are_still_events():
    text = '[{"type": "none", "trigger": "unknown", "time": null, "location": "n/a", "subject": null, "object": null}]'
    check_output(outputs.struct_output(), text)
    (event,) = load(parse_structured(text)["structured_json"])
    assert (event["type"], event["trigger"], event["location"]) == ("none", "unknown", None)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("page_date", " 2026-13-01"),
        ("page_date", " Unknown"),
        ("page_date", " 0999"),
        ("event_time", " sometime in 2026"),
        ("extract_news", "\n2. Storm hits."),
        ("extract_news", " Storm hits.\n3. Aid arrives."),  # numbering out of sequence
        ("extract_news", " Storm hits.\n\nSome prose."),
        ("event_struct", "None"),
        ("event_struct", "[]"),
        ("event_struct", '[{"type": "attack"}]'),
        ("event_struct", '[{"type": "1st", "trigger": "x", "time": null, "location": null, "subject": null, "object": null}]'),
        ("mcnc_negatives", " one\nB: two"),
        ("mcnc_negatives", " one\nB: two\nC: ..."),
        ("mcac_question", " Who?\nTrue answer: A\nWrong answer A: B\nWrong answer B: C"),
        ("mcac_question", " Who\nTrue answer: A\nWrong answer A: B\nWrong answer B: C\nWrong answer C: D"),
    ],
)  # fmt: skip
def test_answers_outside_the_declared_form_fail_the_check(name, text):
    with pytest.raises(ParseError):
        check_output(FULL[name], text)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_required_date, " Unknown"),
        (timeline.parse_timeline, "   "),
        (parse_structured, "no json here"),
        (questions.parse_negatives, " one\nB: two"),
        (questions.parse_mcac, " Who?\nTrue answer: A"),
    ],
)
def test_parsers_still_reject_malformed_answers_of_unenforcing_backends(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def _worst_case_tokens(form: dict) -> float:
    """Tokens of the longest answer a form allows, at ``CHARS_PER_TOKEN`` characters per token."""
    if "json" in form:
        schema = form["json"]
        event = schema["items"]["properties"]
        chars = event["subject"]["maxLength"]
        return schema["maxItems"] * (outputs.STRUCT_OVERHEAD + 7 * chars / outputs.CHARS_PER_TOKEN)
    width = re._parser.parse(form["regex"]).getwidth()[1]  # type: ignore[attr-defined]
    return width / outputs.CHARS_PER_TOKEN


@pytest.mark.parametrize("budget", [64, 96, 128, 256, 1024])
@pytest.mark.parametrize(
    "name", ["extract_news", "complement", "event_struct", "mcnc_negatives", "mcac_question"]
)
def test_fitted_forms_finish_within_their_budget(name, budget):
    form = outputs.fitted(f"openforecast.{name}", budget)
    assert _worst_case_tokens(form) <= budget * 1.1


def test_fitted_timelines_keep_several_items_under_a_demo_cap():
    form = outputs.fitted("openforecast.extract_news", 128)
    assert form["regex"].count("\\. ") == 4  # items 2..5
    sent = below_cap("openforecast.extract_news", outputs.fitted)
    assert sent(answer_budget("openforecast.extract_news", None)) is None
    assert sent(answer_budget("openforecast.extract_news", 4096)) is None
    assert sent(answer_budget("openforecast.extract_news", 128)) == form
    assert fit(timeline_stage("timeline_r01", "openforecast.complement"), 128).structured == outputs.fitted(
        "openforecast.complement", 128
    )
    assert below_cap("openforecast.page_date", outputs.fitted)(8) is None  # fixed size: the prompt's own form


def test_a_request_keeps_the_schema_key_order_the_prompt_describes():
    """The engines generate a JSON object's properties in the schema's order; the request's form
    keeps the declared order (it was sorted, so only ``{"extra"…, "location"…, "object"…}``-first
    answers were possible, unlike the prompt's ``type, trigger, time, …``)."""
    import xgrammar
    from xgrammar.testing import _is_grammar_accept_string

    from pipelines.llm.render import structured_form

    form = json.loads(structured_form(load_prompt("openforecast.event_struct").output))
    assert list(form["json"]["items"]["properties"])[:3] == ["type", "trigger", "time"]
    grammar = xgrammar.Grammar.from_json_schema(json.dumps(form["json"]))
    answer = '[{"type": "Strike", "trigger": "walked out", "time": null, "location": "Lyon", "subject": null, "object": null}]'
    assert _is_grammar_accept_string(grammar, answer)
    assert structured_form(None) is None
