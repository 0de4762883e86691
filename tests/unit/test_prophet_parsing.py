"""Parsers of the evidence prompts, on answers captured from the embedded model
(``tests/fixtures/prophet/local_model_outputs.json``) and on hand-written good and bad ones."""

import json
from pathlib import Path

import pytest

from udfs.llm_parsing import ParseError, parse_verbalized_probability
from udfs.prophet.parsing import expected_rating, parse_query_list, parse_rating

CAPTURED = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "prophet" / "local_model_outputs.json").read_text()
)


@pytest.mark.parametrize("case", CAPTURED["query_lists"], ids=lambda c: c["raw_text"][:30])
def test_query_lists_captured_from_the_local_model(case):
    if case["expected"] is None:
        with pytest.raises(ParseError):
            parse_query_list(case["raw_text"])
    else:
        assert parse_query_list(case["raw_text"])["queries"] == case["expected"]


def test_captured_answers_cover_good_and_bad_cases():
    outcomes = {c["expected"] is None for c in CAPTURED["query_lists"]}
    assert outcomes == {True, False} and CAPTURED["relevance"]


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        (
            'Federal Reserve", "interest rate cut"',
            None,
            ["Federal Reserve", "interest rate cut"],
        ),  # prefix opened it
        ('["Fed", "ECB"]', None, ["Fed", "ECB"]),  # the model wrote the whole list
        ('Output: ["a", "b"] and more', None, ["a", "b"]),
        ('a", "b", "c", "d"', 2, ["a", "b"]),  # more than num_queries: the first ones
        ('Fed", "fed ", "FED", "rates"', None, ["Fed", "rates"]),  # duplicates ignoring case
        ('oil  price  rise", "entity 1"', None, ["oil price rise"]),  # spaces folded, placeholder dropped
        ('oil price", "Brent crude", "OPEC cu', None, ["oil price", "Brent crude"]),  # cut by max_tokens
        (r'Nasdaq 100 July 2024", "S\&P 500 record high", "Dow', 5, ["Nasdaq 100 July 2024"]),  # bad escape
        (r'Nasdaq", "S\&P 500"]', None, ["Nasdaq"]),  # a bad escape ends the list like a cut
    ],
)
def test_query_list_parser_accepts(text, limit, expected):
    assert parse_query_list(text, limit)["queries"] == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "No list here.",
        '"only one unterminated',
        'entity 1", "event 2", "query 3',
        "[1, 2]",
        '[""]',
        r'S\&P 500 record high", "Nasdaq 100 July 2024',  # the first item's escape is invalid JSON
        r'["S\&P 500"]',
    ],
)
def test_query_list_parser_rejects(text):
    with pytest.raises(ParseError):
        parse_query_list(text)


@pytest.mark.parametrize("case", CAPTURED["relevance"], ids=lambda c: c["raw_text"][:30])
def test_ratings_captured_from_the_local_model(case):
    if case["expected"] is None:
        with pytest.raises(ParseError, match="Rating"):
            parse_rating(case["raw_text"])
    else:
        assert parse_rating(case["raw_text"])["rating"] == case["expected"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" The article is about a strike.\nRating: 4", 4),
        ("Thoughts: maybe Rating: 2 at first.\nRating: 5", 5),  # the last one counts
        ("Thoughts: ok\n**Rating:** 6", 6),
        ("thoughts: fine\nrating: 3", 3),
    ],
)
def test_rating_parser_accepts(text, expected):
    assert parse_rating(text) == {"rating": expected}


@pytest.mark.parametrize(
    "text", ["Rating: <your rating>", "Rating: 7", "Rating: 10", "Rating: 0", "I'd say 4."]
)
def test_rating_parser_rejects(text):
    with pytest.raises(ParseError):
        parse_rating(text)


def test_expected_rating_from_scored_options():
    for case in CAPTURED["scored_relevance"]:
        assert expected_rating(case["options"], case["option_probs"]) == case["expected"]
    options = ["1", "2", "3", "4", "5", "6"]
    assert expected_rating(options, [1, 0, 0, 0, 0, 0]) == 1
    assert expected_rating(options, [0, 0, 0, 0, 0, 1]) == 6
    assert expected_rating(options, [0.5, 0, 0, 0, 0, 0.5]) == 4  # mean 3.5 rounds half up


def test_verbalized_answers_captured_from_the_local_model():
    for case in CAPTURED["verbalized"]:
        if case["expected"] is None:
            with pytest.raises(ParseError):
                parse_verbalized_probability(case["raw_text"])
        else:
            assert parse_verbalized_probability(case["raw_text"])["prob"] == case["expected"]
