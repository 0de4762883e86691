"""Reading forecasters' and judges' answers back: option shuffling, verbalized distributions,
orderings, event lists, verdicts; and per-item scoring with refusals."""

import datetime as dt
import json

import pytest

from udfs.evaluate import answers
from udfs.evaluate.scoring import score_choice, score_open, score_order
from udfs.llm_parsing import ParseError


def test_shuffle_is_seeded_per_item_and_maps_back():
    perm = answers.shuffle_permutation("q1", 4, seed=0)
    assert sorted(perm) == [0, 1, 2, 3] and perm == answers.shuffle_permutation("q1", 4, seed=0)
    orders = {tuple(answers.shuffle_permutation(f"q{i}", 4, seed=0)) for i in range(40)}
    assert len(orders) > 5  # not a fixed order
    presented = [0.1, 0.2, 0.3, 0.4]
    original = answers.to_original_order(presented, perm)
    assert all(original[perm[j]] == presented[j] for j in range(4))


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ('{"Yes": 0.7, "No": 0.3}', ["Yes", "No"], [0.7, 0.3]),
        ('"yes": 0.2, "no": 0.6}', ["Yes", "No"], [0.25, 0.75]),  # continues the prompt's "{"; renormalised
        ('{"A": 1.4, "B": -0.2, "C": "0.5"}', list("ABCD"), [1 / 1.5, 0.0, 0.5 / 1.5, 0.0]),  # clipped
        ('Sure. {"(B)": "40%", "D": 0.6} done', list("ABCD"), [0.0, 0.4, 0.0, 0.6]),
    ],
)
def test_verbalized_distributions(text, labels, expected):
    parsed = json.loads(answers.parse_verbalized_json(text)["answer_json"])
    assert answers.parse_label_probabilities(json.dumps(parsed), labels) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I cannot predict the future.", "no JSON dict"),
        ('{"E": 0.5}', "no probability for any option"),
        ('{"A": 0, "B": 0}', "sum to 0"),
        ('{"A": "high"}', "no probability for any option"),
    ],
)
def test_verbalized_refusals(text, message):
    with pytest.raises(ParseError, match=message):
        answers.parse_label_probabilities(text, list("ABCD"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" B,C,A.", [1, 2, 0]),
        ("A, B, C", [0, 1, 2]),
        ("C > A > B\nbecause", [2, 0, 1]),
        ("(B),(A),(C)", [1, 0, 2]),
    ],
)
def test_orderings(text, expected):
    assert answers.parse_order(text, 3) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("B,B,A", "not a permutation"),
        ("A,B", "not a permutation"),
        ("D,A,B", "not a permutation"),
        ("The first event", "no comma"),
    ],
)
def test_invalid_orderings(text, message):
    with pytest.raises(ParseError, match=message):
        answers.parse_order(text, 3)


def test_event_lists_short_answers_and_verdicts():
    assert answers.parse_continued_list(" Rain stops.\n2. The port reopens.\n\nExtra")["events"] == [
        "Rain stops.",
        "The port reopens. Extra",
    ]
    with pytest.raises(ParseError):
        answers.parse_continued_list("   ")
    assert answers.parse_short_answer("\n  Ana Petrova\nmore")["answer"] == "Ana Petrova"
    with pytest.raises(ParseError, match="empty"):
        answers.parse_short_answer(" \n ")
    assert answers.parse_match_verdict(" Yes (2) because") == {"verdict_yes": True, "verdict_label": 2}
    assert answers.parse_match_verdict("No.") == {"verdict_yes": False, "verdict_label": None}
    assert answers.parse_match_verdict("yes") == {"verdict_yes": True, "verdict_label": None}
    with pytest.raises(ParseError, match="verdict"):
        answers.parse_match_verdict("Maybe (1)")
    assert answers.matched_label(True, 2, 3) == 1
    assert (
        answers.matched_label(True, 4, 3) is None and answers.matched_label(True, None, 3) is None
    )  # Yes without index = No
    assert answers.matched_label(False, 1, 3) is None


def test_dedup_drops_later_near_duplicates():
    import numpy as np

    vectors = np.array([[1.0, 0.0], [0.999, 0.0447], [0.0, 1.0]])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert answers.dedup_by_similarity(vectors, 0.95) == [0, 2]


CUT = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)


def test_scoring_choice_items_and_refusals():
    mc = {"item_id": "m", "type": "mc", "choices": list("abcd"), "gold_index": 2, "t_cut": CUT}
    right = score_choice(mc, [0.1, 0.1, 0.7, 0.1])
    assert (
        right["correct"] == 1.0
        and right["brier_sum"] == pytest.approx(0.12)
        and right["brier_binary"] is None
    )
    refused = score_choice(mc, None)
    assert refused["correct"] == 0.0 and refused["brier_sum"] == pytest.approx(0.75)
    binary = {"item_id": "b", "type": "binary_prob", "gold_value": 0.0, "t_cut": CUT}
    scored = score_choice(binary, [0.3, 0.7])
    assert scored["correct"] == 1.0 and scored["brier_binary"] == pytest.approx(0.09)
    assert scored["brier_sum"] == pytest.approx(0.18)
    assert score_choice(binary, None)["brier_binary"] == 0.25
    tie = score_choice(
        {"item_id": "y", "type": "yesno", "choices": ["Yes", "No"], "gold_index": 1, "t_cut": CUT}, [0.5, 0.5]
    )
    assert tie["tie"] and tie["prediction"] == 0 and tie["correct"] == 0.0
    with pytest.raises(ValueError, match="probabilities"):
        score_choice(mc, [0.5, 0.5])


def test_scoring_orders_and_open_items():
    item = {"item_id": "o", "type": "ordering", "gold_order": [1, 2, 0]}
    assert score_order(item, [1, 2, 0]) == {"pred_order": [1, 2, 0], "correct": 1.0, "levenshtein": 0.0}
    assert score_order(item, None)["levenshtein"] == 3.0
    open_item = {"item_id": "s", "type": "open", "gold_texts": ["a", "b", "c"]}
    scored = score_open(open_item, ["p1", "p2", "p3", "p4"], [0, 0, None, None], [False, False, True, False])
    assert scored["open_precision"] == pytest.approx(0.75) and scored["open_recall"] == pytest.approx(0.6)
    assert scored["open_f1_code"] == pytest.approx(0.5) and scored["open_stage1"] == [0, 0, -1, -1]


OPTIONS = ["A ceasefire is signed", "Talks collapse", "The mediator resigns", "Nothing changes"]


@pytest.mark.parametrize(
    ("text", "ask", "expected"),
    [
        ("Yes.", "yesno", [1.0, 0.0]),
        ("I would say no, because rates fell.", "yesno", [0.0, 1.0]),
        ("Reasoning... *0.3* then revised to *0.65*", "probability", [0.65, 0.35]),
        ("*1.0*", "probability", [1.0, 0.0]),
        ("* .25 *", "probability", [0.25, 0.75]),
        ("The answer is (c), since talks stalled (a)", "letter", [0.0, 0.0, 1.0, 0.0]),
        ("B. Talks collapse.", "letter", [0.0, 1.0, 0.0, 0.0]),
        ("d)", "letter", [0.0, 0.0, 0.0, 1.0]),
        ("talks collapse.", "letter", [0.0, 1.0, 0.0, 0.0]),
        ("A ceasefire is signed.", "letter", [1.0, 0.0, 0.0, 0.0]),  # the option's text, not letter A
        ("the mediator resigns", "letter", [0.0, 0.0, 1.0, 0.0]),
    ],
)
def test_free_text_answers_in_the_papers_forms(text, ask, expected):
    labels = answers.option_labels(4) if ask == "letter" else ["Yes", "No"]
    assert answers.read_free_text(text, ask, labels, OPTIONS if ask == "letter" else []) == expected


@pytest.mark.parametrize(
    ("text", "ask"),
    [
        ("The future cannot be known.", "yesno"),
        ("Nobody knows.", "yesno"),
        ("Probably yes, around 0.7.", "probability"),
        ("*1.5*", "probability"),
        ("I cannot choose between these options.", "letter"),
        ("(e) none of them", "letter"),
        ("E. none", "letter"),
    ],
)
def test_free_text_without_an_answer_form_is_a_refusal(text, ask):
    labels = answers.option_labels(4) if ask == "letter" else ["Yes", "No"]
    with pytest.raises(ParseError, match="refusal"):
        answers.read_free_text(text, ask, labels, OPTIONS)


def test_free_text_stage_parser_keeps_the_reply_and_refuses_an_empty_one():
    assert answers.parse_free_text("  (b)\n") == {"answer_text": "(b)"}
    with pytest.raises(ParseError, match="empty"):
        answers.parse_free_text(" \n")
    assert [answers.text_ask(k) for k in ("yesno", "mc", "binary_prob")] == ["yesno", "letter", "probability"]


def test_the_evaluation_command_line_takes_every_answer_format_and_the_new_options():
    from pipelines.evaluate.run import Config
    from udfs.cli import parse

    argv = ["--root", "r", "--answer-format", "text", "--runs", "2", "--order-strategies", "one_by_one"]
    config = parse(Config, argv, "python -m pipelines.evaluate")
    assert (config.answer_formats, config.runs, config.order_strategies) == (("text",), 2, ("one_by_one",))
    config = parse(Config, ["--root", "r", "--answer-formats", "choice,scratchpad,cot"], "x")
    assert config.answer_formats == ("choice", "scratchpad", "cot")
    assert config.modes == ("closed_book", "retrieval", "gold_context")  # long_context is opt-in
    with pytest.raises(SystemExit):
        parse(Config, ["--root", "r", "--answer-formats", "poem"], "x")


@pytest.mark.parametrize(
    ("text", "ask", "expected"),
    [
        (
            "1. Reasons the answer could be No: rates.\n2. Reasons for Yes: demand.\nFinal answer: Yes",
            "yesno",
            [1.0, 0.0],
        ),
        ("(a) seems plausible, but (c) fits the reports better.\nFinal: (c)", "letter", [0.0, 0.0, 1.0, 0.0]),
        ("Weighing both sides.\nB. Talks collapse.", "letter", [0.0, 1.0, 0.0, 0.0]),
        ("Several signs point one way.\nTalks collapse", "letter", [0.0, 1.0, 0.0, 0.0]),
    ],
)
def test_reasoned_answers_are_read_at_their_end(text, ask, expected):
    labels = answers.option_labels(4) if ask == "letter" else ["Yes", "No"]
    assert answers.read_free_text(text, ask, labels, OPTIONS, reasoned=True) == expected
    if ask == "yesno":  # read as a plain answer, the reasoning's first word would win
        assert answers.read_free_text(text, ask, labels, OPTIONS) == [0.0, 1.0]


def test_a_reply_opening_with_the_word_a_is_no_option():
    with pytest.raises(ParseError, match="refusal"):
        answers.read_free_text(
            "A prediction is impossible here.", "letter", answers.option_labels(4), OPTIONS
        )
    assert answers.read_free_text("b", "letter", answers.option_labels(4), OPTIONS) == [0.0, 1.0, 0.0, 0.0]
