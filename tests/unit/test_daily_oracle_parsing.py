"""Parsers of the Daily Oracle steps, on hand-written answers (good, missing field, extra text)
and on answers captured from the embedded Gemma 3 270M base model
(``tests/fixtures/daily_oracle/captured_local_model.json``)."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.daily_oracle.stages import STAGES
from pipelines.llm.assemble import answer_turn
from udfs.daily_oracle.parsing import (
    CATEGORIES,
    FILTER_HEADINGS,
    OTHER,
    clean_option,
    is_no_new_event,
    normalise_category,
    parse_distractors,
    parse_filter,
    parse_qa,
    parse_summary,
    score_block,
)
from udfs.daily_oracle.questions import keep
from udfs.llm_parsing import ParseError
from udfs.prompts import load_prompt


def _assistant_turn(parser, prompt_id: str):
    """How the stage runner parses a ``parse_prefix`` stage: the answer prefix plus the answer."""
    return answer_turn(parser, load_prompt(prompt_id).answer_prefix)


CAPTURED = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "daily_oracle" / "captured_local_model.json"
    ).read_text()
)
PARSERS = {
    "daily_oracle.summary": parse_summary,
    "daily_oracle.qa": parse_qa,
    "daily_oracle.distractors": parse_distractors,
    "daily_oracle.filter": parse_filter,
}


# ------------------------------------------------------------------ step 1
def test_summary_good():
    text = "Summary: BP agreed to pay $2.75 million.\nIt settled a lawsuit.\n\nKeypoint: BP agreed to pay $2.75 million."
    assert parse_summary(text) == {
        "summary": "BP agreed to pay $2.75 million. It settled a lawsuit.",
        "keypoint": "BP agreed to pay $2.75 million.",
    }


@pytest.mark.parametrize("label", ["Keypoint:", "Key Point:", "Key point:", "**Keypoint:**", "KEYPOINT :"])
def test_summary_keypoint_labels(label):
    assert (
        parse_summary(f"Summary: s\n{label} Fiona hit Puerto Rico.")["keypoint"] == "Fiona hit Puerto Rico."
    )


def test_summary_keypoint_on_the_next_line_and_extra_text_after_it():
    text = "Summary: s\nKeypoint:\n  Fiona hit Puerto Rico on 2022-09-18.\n## Example 3\nArticle: other"
    assert parse_summary(text)["keypoint"] == "Fiona hit Puerto Rico on 2022-09-18."
    repeated = "Summary: s\nKeypoint: First event.\nKeypoint: First event.\nKeypoint: First"
    assert parse_summary(repeated)["keypoint"] == "First event."


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Summary: BP agreed to pay $2.75 million.", "no Keypoint"),
        ("Summary: s\nKeypoint:", "empty keypoint"),
        ("Summary: ...\nKeypoint: ...", "empty keypoint"),
        ("", "no Keypoint"),
    ],
)
def test_summary_malformed(text, error):
    with pytest.raises(ParseError, match=error):
        parse_summary(text)


def test_no_new_event_marker():
    assert is_no_new_event(parse_summary("Summary: opinion.\nKeypoint: No new event reported.")["keypoint"])
    assert is_no_new_event("no NEW event reported")
    assert not is_no_new_event("A new event was reported.")


# ------------------------------------------------------------------ step 2
GOOD_QA = """Question 1: "Will BP pay a penalty: a fine over pollution by September 2022?"
Answer 1: Yes.
Question 2: Will BP close the Whiting refinery by September 2022?
Answer 2: No.
Question 3: How much will BP pay in September 2022?
Answer 3: $2.75 million.
**Question 4:** Which state will host the refinery in September 2022?
**Answer 4:** Indiana
"""


def test_qa_good_keeps_colons_and_strips_quotes():
    parsed = parse_qa(GOOD_QA)
    assert parsed["questions"][0] == "Will BP pay a penalty: a fine over pollution by September 2022?"
    assert parsed["answers"] == ["Yes.", "No.", "$2.75 million.", "Indiana"]
    assert parsed["questions"][3] == "Which state will host the refinery in September 2022?"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (GOOD_QA.replace("Answer 3: $2.75 million.\n", ""), "missing answer 3"),
        (GOOD_QA + "Question 5: Will more happen?\nAnswer 5: Yes.", "extra answer 5, question 5"),
        (GOOD_QA + "Question 1: Will it repeat?", "repeated question 1"),
        (GOOD_QA.replace("Indiana", '""'), "empty question or answer"),
        ("I cannot write questions about this article.", "missing"),
    ],
)
def test_qa_malformed(text, error):
    with pytest.raises(ParseError, match=error):
        parse_qa(text)


def test_qa_answer_that_repeats_the_prefilled_header():
    """The model writes ``Question 1:`` again on a new line after the prefilled one."""
    generated = "\n" + GOOD_QA
    with pytest.raises(ParseError, match="repeated question 1"):
        parse_qa(load_prompt("daily_oracle.qa").answer_prefix + generated)  # the prefix seen twice
    parse = _assistant_turn(parse_qa, "daily_oracle.qa")
    assert STAGES["qa"].parse_prefix and STAGES["qa"].parser is parse_qa
    assert parse(generated) == parse_qa(GOOD_QA)
    assert parse(GOOD_QA.removeprefix("Question 1:")) == parse_qa(GOOD_QA)  # no repeat: prefixed


# ------------------------------------------------------------------ step 3
GOOD_DISTRACTORS = """Noising Answers 1:
(b) '$1 million'
(c) "$5.5 million".
(d) $10 million
Noising Answers 2:
(b) Ohio.
(c) 'Illinois'
(d) Michigan
Some extra commentary the prompt did not ask for.
"""


def test_distractors_good():
    assert parse_distractors(GOOD_DISTRACTORS)["distractors"] == [
        "$1 million",
        "$5.5 million",
        "$10 million",
        "Ohio",
        "Illinois",
        "Michigan",
    ]


@pytest.mark.parametrize(
    "raw", ['a".``', " 'Ohio'. ", '"`Twelve`".', "x . `", "...", pytest.param("“Dr. No.”", id="curly-quotes")]
)
def test_clean_option_examples_are_fixed_points(raw):
    cleaned = clean_option(raw)
    assert clean_option(cleaned) == cleaned
    assert cleaned == cleaned.strip().strip("\"'“”‘’`").rstrip(".").strip()


@given(st.text(alphabet="ab .\"'`“”‘’ \n", max_size=12))
def test_clean_option_is_idempotent(raw):
    cleaned = clean_option(raw)
    assert clean_option(cleaned) == cleaned


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (GOOD_DISTRACTORS.replace("(d) Michigan\n", ""), "expected 6"),
        (GOOD_DISTRACTORS.replace("(c) 'Illinois'", "(d) 'Illinois'"), "labels out of order"),
        ("Noising Answers 1:\n(b) xxx.\n(c) xxx.", "expected 6"),
        (GOOD_DISTRACTORS.replace("(c) 'Illinois'", "(c) ..."), "empty option"),
    ],
)
def test_distractors_malformed(text, error):
    with pytest.raises(ParseError, match=error):
        parse_distractors(text)


# ------------------------------------------------------------------ step 4
def judge_block(k: int, points: list[int], headings=FILTER_HEADINGS) -> str:
    lines = [f"*Question {k}*"]
    for heading, point in zip(headings, points, strict=False):
        lines += [f"## {heading}", f"- Reasoning: considered {heading.lower()}.", f"- Point: {point}"]
    return "\n".join(lines)


def test_filter_good_and_the_keep_rule():
    text = "\n".join(
        judge_block(k, p) for k, p in enumerate([[2] * 7, [2] * 6 + [1], [2] * 5 + [1, 1], [0] + [2] * 6], 1)
    )
    parsed = parse_filter(text)
    assert parsed["filter_errors"] == [None] * 4
    assert [sum(s) for s in parsed["filter_scores"]] == [14, 13, 12, 12]
    assert [keep(s) for s in parsed["filter_scores"]] == [True, True, False, False]
    assert parsed["filter_blocks"][0].startswith("## Correctness")


def test_filter_one_bad_block_rejects_one_question():
    blocks = [
        judge_block(1, [2] * 7),
        judge_block(2, [2] * 6),  # a heading missing
        judge_block(3, [2] * 6 + [3]),  # a point out of range
        judge_block(4, [2] * 7, headings=list(reversed(FILTER_HEADINGS))),
    ]
    parsed = parse_filter("\n".join(blocks))
    assert parsed["filter_scores"][0] == [2] * 7
    assert parsed["filter_scores"][1:] == [None, None, None]
    assert "got 6" in parsed["filter_errors"][1]
    assert "not 0, 1 or 2" in parsed["filter_errors"][2]
    assert "in order" in parsed["filter_errors"][3]


def test_filter_missing_block_and_markdown_variants():
    text = (
        judge_block(1, [2] * 7)
        .replace("*Question 1*", "**Question 1**")
        .replace("- Point: 2", "- **Points:** 2")
    )
    parsed = parse_filter(text + "\n" + judge_block(3, [2] * 7))
    assert parsed["filter_scores"][0] == [2] * 7 and parsed["filter_scores"][2] == [2] * 7
    assert parsed["filter_errors"][1] == "no block for question 2" and parsed["filter_blocks"][1] is None


def test_filter_answer_that_repeats_the_prefilled_header():
    """Captured shape: after the prefilled ``*Question 1*`` the model writes ``*Question 1*``
    again, so the first block of question 1 is empty; the first non-empty one counts."""
    generated = "\n" + "\n".join(judge_block(k, [2] * 7) for k in range(1, 5))
    prefix = load_prompt("daily_oracle.filter").answer_prefix
    assert prefix == "*Question 1*"
    both = parse_filter(prefix + generated)
    assert both["filter_scores"] == [[2] * 7] * 4 and both["filter_errors"] == [None] * 4
    assert STAGES["filter"].parse_prefix and STAGES["filter"].parser is parse_filter
    assert _assistant_turn(parse_filter, "daily_oracle.filter")(generated) == both
    bold = generated.replace("*Question 1*", "**Question 1**")
    assert _assistant_turn(parse_filter, "daily_oracle.filter")(bold)["filter_scores"][0] == [2] * 7
    empty_only = parse_filter(prefix + "\n*Question 1*\n" + judge_block(2, [2] * 7))
    assert "got 0" in empty_only["filter_errors"][0]


def test_filter_without_any_block_is_a_parse_error():
    with pytest.raises(ParseError, match="no \\*Question k\\* block"):
        parse_filter("## Correctness\n- Point: 2")


def test_score_block_needs_a_point_under_each_heading():
    block = judge_block(1, [2] * 7).replace("- Point: 2", "- Point:", 1)
    with pytest.raises(ParseError, match="no point under 'Correctness'"):
        score_block(block.split("\n", 1)[1])


# ------------------------------------------------------------------ category
@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Sports", "Sports"),
        ("  'security & defense'. ", "Security & Defense"),
        ('"Economics & Business"', "Economics & Business"),
        ("Economics", OTHER),
        ("", OTHER),
        (None, OTHER),
    ],
)
def test_normalise_category(text, label):
    assert normalise_category(text) == label


def test_category_labels_score_in_one_step_on_the_embedded_tokenizer(local_model_dir):
    """No label is a token prefix of another (no relabelling needed), and their first tokens all
    differ, so one next-token distribution scores them."""
    from pipelines.llm.tokenizer import engine_tokenizer
    from udfs.choice import plan_choice

    tokenizer = engine_tokenizer(str(local_model_dir))
    plan = plan_choice(CATEGORIES, lambda s: tokenizer(s, add_special_tokens=False)["input_ids"], False)
    assert len(plan.nodes) == 1 and len(plan.nodes[0].groups) == len(CATEGORIES)
    assert tuple(load_prompt("daily_oracle.category").options) == CATEGORIES


# ------------------------------------------------------------------ captured model outputs
@pytest.mark.parametrize("case", CAPTURED, ids=[f"{c['prompt_id']}-{c['title'][:20]}" for c in CAPTURED])
def test_captured_outputs(case):
    """Every captured answer parses or fails with the reason recorded beside it."""
    assert case["answer_prefix"] == load_prompt(case["prompt_id"]).answer_prefix
    parse = PARSERS[case["prompt_id"]]
    text = case["answer_prefix"] + case["generated_text"]
    if case["expect"].startswith("error:"):
        with pytest.raises(ParseError, match=re.escape(case["expect"][len("error:") :].strip())):
            parse(text)
    else:
        parsed = parse(text)
        assert json.dumps(parsed, sort_keys=True) == case["expect"]
