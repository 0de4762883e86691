import pytest

from udfs.llm_parsing import (
    ParseError,
    check_output,
    first_json,
    json_string_list,
    labelled_fields,
    numbered_list,
    parse_verbalized_probability,
    strip_answer,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Reasons... so *0.62*", 0.62),
        ("first *0.1* then final *0.9*", 0.9),
        ("* .5 *", 0.5),
        ("*1.0*", 1.0),
        ("*1*", 1.0),
        ("*0*", 0.0),
    ],
)
def test_verbalized_probability(text, expected):
    assert parse_verbalized_probability(text)["prob"] == pytest.approx(expected)


@pytest.mark.parametrize("text", ["0.62", "*1.5*", "*62%*", "", "**", "*0.6"])
def test_verbalized_probability_rejects(text):
    with pytest.raises(ParseError):
        parse_verbalized_probability(text)


def test_first_json_handles_brackets_inside_strings_and_prose():
    text = 'Sure! Here: ["a [b]", "c"] and then [1, 2]'
    assert first_json(text) == ["a [b]", "c"]
    assert first_json('x {"k": "}"} y', dict) == {"k": "}"}
    with pytest.raises(ParseError):
        first_json("no list here")
    with pytest.raises(ParseError):
        first_json("[unquoted, words]")


def test_json_string_list_length_check():
    assert json_string_list('["a", " b "]', expected=2) == ["a", "b"]
    with pytest.raises(ParseError, match="expected 3"):
        json_string_list('["a", "b"]', expected=3)
    with pytest.raises(ParseError):
        json_string_list("[1, 2]")


def test_numbered_list_follows_the_sequence():
    text = "Timeline:\n1. A happened.\n2. B followed\n   on two lines.\n4. stray\n3. C."
    assert numbered_list(text) == ["A happened.", "B followed on two lines. 4. stray", "C."]
    with pytest.raises(ParseError):
        numbered_list("None")


def test_labelled_fields():
    text = "Thoughts: it is relevant.\nRating: 5"
    assert labelled_fields(text, ["Thoughts", "Rating"]) == {"Thoughts": "it is relevant.", "Rating": "5"}
    with pytest.raises(ParseError, match="Rating"):
        labelled_fields("Thoughts: only this", ["Thoughts", "Rating"])


def test_strip_answer():
    assert strip_answer(' "Paris." ') == "Paris"


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["city", "year"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("output", "text"),
    [
        ({"json": SCHEMA}, '{"city": "Paris", "year": 2021}'),
        ({"regex": r" (\d{4}-\d{2}-\d{2}|Unknown)"}, " 2024-02-29"),
        (
            {"regex": r"[^\n]+\nKeypoint: .+"},
            "a summary\nKeypoint: two\nlines",
        ),  # . spans lines, as in xgrammar
        ({"choice": ["Yes", "No"]}, "No"),
    ],
)
def test_check_output_accepts_conforming_answers(output, text):
    check_output(output, text)


@pytest.mark.parametrize(
    ("output", "text", "message"),
    [
        ({"json": SCHEMA}, '{"city": "Paris"}', "does not match the schema"),
        ({"json": SCHEMA}, "Paris, 2021", "not a JSON document"),
        ({"regex": r" (\d{4}-\d{2}-\d{2}|Unknown)"}, " 2024-02-29 or so", "declared pattern"),
        ({"choice": ["Yes", "No"]}, "Maybe", "none of the declared choices"),
    ],
)
def test_check_output_rejects_other_answers(output, text, message):
    with pytest.raises(ParseError, match=message):
        check_output(output, text)
