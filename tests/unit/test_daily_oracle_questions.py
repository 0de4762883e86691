"""Daily Oracle per-question rules: time elements, post-filters, TF answers, distractor checks,
the keep rule and the seeded option shuffle."""

import datetime as dt
from collections import Counter

import pytest

from udfs.daily_oracle.questions import (
    KEEP_MIN_TOTAL,
    clean_question,
    distractor_problem,
    keep,
    mc_stem,
    normalise_yes_no,
    shuffle_options,
    structural_problem,
    time_element,
)

D = dt.date(2022, 9, 18)


@pytest.mark.parametrize(
    ("question", "phrase", "end"),
    [
        ("Will BP pay a fine by September 2022?", "September 2022", dt.date(2022, 9, 30)),
        ("Will it rain in Sept. 2022?", "Sept. 2022", dt.date(2022, 9, 30)),
        ("Will the vote happen on September 20, 2022?", "September 20, 2022", dt.date(2022, 9, 20)),
        ("Will the vote happen on 20th September 2022?", "20th September 2022", dt.date(2022, 9, 20)),
        ("Will the storm land by 2022-09-19?", "2022-09-19", dt.date(2022, 9, 19)),
        ("Who will win by the end of 2022?", "end of 2022", dt.date(2022, 12, 31)),
        ("What will happen in 2023?", "in 2023", dt.date(2023, 12, 31)),
        ("Will sales rise in Q3 2022?", "Q3 2022", dt.date(2022, 9, 30)),
        (
            "Will sales rise in the fourth quarter of 2022?",
            "the fourth quarter of 2022",
            dt.date(2022, 12, 31),
        ),
        ("Will the show open in the summer of 2022?", "summer of 2022", dt.date(2022, 8, 31)),
        ("Will snow fall in winter 2022?", "winter 2022", dt.date(2023, 2, 28)),
        ("Will prices fall in the second half of 2022?", "the second half of 2022", dt.date(2022, 12, 31)),
        (
            "Will the company founded in 2019 list its shares by October 2022?",
            "October 2022",
            dt.date(2022, 10, 31),
        ),
    ],
)
def test_time_elements(question, phrase, end):
    found = time_element(question)
    assert found is not None and (found.phrase, found.end) == (phrase, end)


@pytest.mark.parametrize(
    "question",
    [
        "Will it rain in July?",  # a month without a year scores 0 in the filter
        "Will prices rise in the coming weeks?",
        "Will prices rise next month?",
        "Will 2022 votes be cast for the mayor?",  # a number, not a time
        "Will the vote happen on 2022-02-30?",  # no such day
    ],
)
def test_no_time_element(question):
    assert time_element(question) is None


def test_structural_post_filters():
    ok = "Will BP pay a fine by September 2022?"
    assert structural_problem(ok, D) is None
    assert structural_problem("Will BP pay a fine by September 2022.", D)[0] == "no_question_mark"
    assert (
        structural_problem("According to officials, will BP pay by September 2022?", D)[0]
        == "mentions_article"
    )
    assert structural_problem("Will the ARTICLE say so by September 2022?", D)[0] == "mentions_article"
    assert structural_problem("Will five articles appear by September 2022?", D) is None  # plural passes
    assert structural_problem("Will BP pay a fine in the coming weeks?", D)[0] == "no_time_element"
    before = structural_problem("Will BP pay a fine by August 2022?", D)
    assert before[0] == "time_element_before_cutoff" and "2022-08-31" in before[1]
    assert structural_problem("Will the storm land on September 17, 2022?", D) is None  # d_res - 1 is unseen
    assert (
        structural_problem("Will the storm land on September 16, 2022?", D)[0] == "time_element_before_cutoff"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Yes", "Yes"),
        ("Yes.", "Yes"),
        ('"No."', "No"),
        ("no", "No"),
        ("Yes, it will.", None),
        ("Maybe", None),
    ],
)
def test_tf_answers(raw, expected):
    assert normalise_yes_no(raw) == expected


def test_clean_question_strips_quotes():
    assert clean_question(" “Will X happen by May 2024?” ") == "Will X happen by May 2024?"
    assert clean_question("'Will X happen by May 2024?'") == "Will X happen by May 2024?"


@pytest.mark.parametrize(
    ("question", "stem"),
    [
        ("What will BP pay?", "what"),
        ("Who will win?", "who"),
        ("Which storm will hit?", "which"),
        ("How   many people will vote?", "how many"),
        ("How much will BP pay?", "how much"),
        ("Will BP pay?", "other"),
    ],
)
def test_mc_stem(question, stem):
    assert mc_stem(question) == stem


def test_distractor_checks():
    assert distractor_problem("Indiana", ["Ohio", "Illinois", "Michigan"]) is None
    assert distractor_problem("Indiana.", ["Ohio", "indiana", "Michigan"])[0] == "distractor_equals_answer"
    assert distractor_problem("Indiana", ["Ohio", "OHIO", "Michigan"])[0] == "distractors_repeat"


@pytest.mark.parametrize(
    ("scores", "kept"),
    [
        ([2] * 7, True),  # 14
        ([2] * 6 + [1], True),  # 13
        ([2] * 5 + [1, 1], False),  # 12
        ([2] * 6 + [0], False),  # any 0 leaves at most 12
        ([2] * 6, False),  # six scores are not seven
        ([3] + [2] * 6, False),
    ],
)
def test_keep_rule(scores, kept):
    assert keep(scores) is kept
    assert KEEP_MIN_TOTAL == 13


def test_shuffle_is_seeded_and_uniform():
    first = shuffle_options("Indiana.", ["Ohio", "Illinois", "Michigan"], 0, "q1")
    assert first == shuffle_options("Indiana.", ["Ohio", "Illinois", "Michigan"], 0, "q1")
    choices, gold = first
    assert choices[gold] == "Indiana" and sorted(choices) == ["Illinois", "Indiana", "Michigan", "Ohio"]
    letters = Counter(shuffle_options("A", ["B", "C", "D"], 0, f"q{i}")[1] for i in range(1000))
    assert set(letters) == {0, 1, 2, 3} and all(200 <= n <= 300 for n in letters.values())
    other_seed = [shuffle_options("A", ["B", "C", "D"], 1, f"q{i}")[1] for i in range(50)]
    assert other_seed != [shuffle_options("A", ["B", "C", "D"], 0, f"q{i}")[1] for i in range(50)]
