"""Parsers of the OpenForecast prompts on answers captured from the embedded model
(``tests/fixtures/openforecast/local_model_outputs.json``) and on hand-written malformed ones;
prompt files agree with the parsers' answer prefixes and the category labels are scorable."""

import json
from pathlib import Path

import pytest

from pipelines.openforecast.stages import parse_optional_date, parse_required_date
from udfs.choice import plan_choice
from udfs.llm_parsing import ParseError
from udfs.openforecast import questions, stories, timeline, wiki
from udfs.openforecast.structured import load, parse_structured
from udfs.prompts import load_prompt

CAPTURED = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "openforecast" / "local_model_outputs.json"
    ).read_text()
)


def _captured(index: int, prompt_id: str) -> str:
    entry = CAPTURED[index]
    assert entry["prompt_id"] == prompt_id
    return entry["raw_text"]


def test_timeline_parser_on_captured_answers():
    adjusted = timeline.parse_timeline(_captured(0, "openforecast.adjust"))["events"]
    assert adjusted[:3] == [
        "The government declares a state of emergency.",
        "Storm Nadia floods coastal towns in the south.",
        "Storm Nadia floods coastal towns in the north.",
    ]  # eleven items repeating three: repeats keep their first occurrence
    completed = timeline.parse_timeline(_captured(1, "openforecast.complement"))["events"]
    assert completed[2] == "2026-03-04: Aid arrives after Storm Nadia floods coastal towns in the south."
    wiki_items = timeline.parse_timeline(_captured(5, "openforecast.extract_wiki"))["events"]
    assert wiki_items == [
        "2004-12-28: The Indonesian government declares a state of emergency."
    ]  # "6." dropped
    merged = timeline.parse_timeline(_captured(8, "openforecast.merge"))["events"]
    assert len(merged) == 2  # the prose after the blank line is not part of the list
    news = timeline.parse_timeline(_captured(10, "openforecast.extract_news"))["events"]
    assert news == [
        "The Afghan Armed Forces launch attacks on the border posts of Pakistan along the Durand Line."
    ]
    assert timeline.parse_timeline(_captured(12, "openforecast.extract_news"))["events"][0].endswith(
        "central Africa."
    )
    assert timeline.parse_timeline(_captured(14, "openforecast.adjust"))["events"] == [
        "10:00 a.m.",
        "11:00 a.m.",
        "12:00 p.m.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" None", []),
        ("None.", []),
        (" Storm hits.\n2. None", ["Storm hits."]),
        ("1. Storm hits.\n2. Aid arrives.", ["Storm hits.", "Aid arrives."]),  # a repeated "1." marker
        (
            " Storm hits.\n3. Skipped number\n2. Aid arrives.",
            ["Storm hits. 3. Skipped number", "Aid arrives."],
        ),
        (" Storm hits.\n\n2. Aid arrives.", ["Storm hits.", "Aid arrives."]),
        (" Storm hits.\n2", ["Storm hits."]),
    ],
)
def test_timeline_parser_on_hand_written_answers(text, expected):
    assert timeline.parse_timeline(text)["events"] == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_timeline_answers_are_parse_errors(text):
    with pytest.raises(ParseError):
        timeline.parse_timeline(text)


def test_dates_on_captured_answers():
    assert parse_optional_date(_captured(3, "openforecast.event_time")) == {"ts": "2026-03-03"}
    assert parse_optional_date(_captured(15, "openforecast.event_time")) == {"ts": "2010"}  # 10/10/2010
    assert parse_required_date(_captured(9, "openforecast.page_date")) == {"ts": "2004"}  # 26 December 2004
    assert parse_optional_date(" Unknown") == {"ts": None}
    with pytest.raises(ParseError, match="no yyyy"):
        parse_required_date(" Unknown")


def test_structured_parser_on_captured_answers():
    first = load(parse_structured(_captured(2, "openforecast.event_struct"))["structured_json"])
    assert len(first) == 1  # the second object was cut off by max_tokens; the complete one is kept
    assert first[0]["type"] == "declaration" and first[0]["location"] == "Kinshasa"
    assert first[0]["time"] == "2026-05-30" and first[0]["extra"] == {}
    with pytest.raises(ParseError, match="no JSON list"):
        parse_structured(_captured(18, "openforecast.event_struct"))  # cut inside the first object


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("None", []),
        ("[]", []),
        (
            'Structured: [{"Type": "attack", "trigger": "shells", "time": "unknown", "location": "N/A", '
            '"subject": "Army", "object": null, "target": "depot"}]',
            [
                {
                    "type": "attack",
                    "trigger": "shells",
                    "time": None,
                    "location": None,
                    "subject": "Army",
                    "object": None,
                    "extra": {"target": "depot"},
                }
            ],
        ),
    ],
)
def test_structured_parser_on_hand_written_answers(text, expected):
    assert load(parse_structured(text)["structured_json"]) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no json here", "no JSON list"),
        ('["attack"]', "not a JSON object"),
        ('[{"subject": "Army"}]', "no structured event has a type or trigger"),
    ],
)
def test_malformed_structured_answers(text, message):
    with pytest.raises(ParseError, match=message):
        parse_structured(text)


def test_negatives_parser():
    captured = questions.parse_negatives(_captured(7, "openforecast.mcnc_negatives"))["negatives"]
    assert captured[0] == "2026-05-30: Health workers in Kinshasa confirm 16 new Ebola cases."
    # the base model repeated the true event and one later event: the check rejects the question
    assert questions.distractor_problem(captured[0], captured) == "candidate_equals_gold"
    written = " Storm skips the coast.\n**B:** Army declares emergency.\nNoisy event C) Aid stops."
    assert questions.parse_negatives(written)["negatives"] == [
        "Storm skips the coast.",
        "Army declares emergency.",
        "Aid stops.",
    ]
    with pytest.raises(ParseError, match="expected negatives A, B and C"):
        questions.parse_negatives(" Storm skips the coast.\nB: Army declares emergency.")
    with pytest.raises(ParseError):
        questions.parse_negatives("")


def test_mcac_parser():
    parsed = questions.parse_mcac(_captured(6, "openforecast.mcac_question"))
    assert parsed == {
        "question": "Where will the health workers in Mbandaka be?",
        "true_answer": "the capital",
        "wrong_answers": ["the whole country", "the northern provinces", "the central provinces"],
    }
    with pytest.raises(ParseError, match="missing fields"):
        questions.parse_mcac(" Who?\nTrue answer: Army\nWrong answer A: Navy")


@pytest.mark.parametrize(
    ("prompt_id", "prefix"),
    [
        ("openforecast.extract_wiki", timeline.LIST_PREFIX),
        ("openforecast.extract_news", timeline.LIST_PREFIX),
        ("openforecast.complement", timeline.LIST_PREFIX),
        ("openforecast.merge", timeline.LIST_PREFIX),
        ("openforecast.adjust", timeline.LIST_PREFIX),
        ("openforecast.mcnc_negatives", questions.NEGATIVES_PREFIX),
        ("openforecast.mcac_question", questions.MCAC_PREFIX),
    ],
)
def test_prompts_end_where_their_parsers_start(prompt_id, prefix):
    assert load_prompt(prompt_id).answer_prefix == prefix


def test_label_sets_match_the_prompts_and_are_scorable(local_model_dir):
    from pipelines.llm.tokenizer import engine_tokenizer

    category = load_prompt("openforecast.page_category")
    heading = load_prompt("openforecast.page_heading")
    assert category.options == wiki.CATEGORY_LABELS and heading.options == stories.WCEP_HEADINGS
    tokenizer = engine_tokenizer(str(local_model_dir))

    def tokenize(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    for prompt in (category, heading):
        plan = plan_choice(prompt.options, tokenize, prompt.answer_prefix.endswith(" "))
        assert len(plan.nodes) == 1  # one forward pass decides among every label
    with pytest.raises(ValueError, match="token prefix"):
        plan_choice(["Sports", "Sports Competition"], tokenize, False)  # why "Sports" alone is no label
