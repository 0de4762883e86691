"""Prompt variables of the evidence stages: question fields cut in words, ``(none)`` when empty."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.prophet.config import Config
from pipelines.prophet.stages import query_stage, relevance_stage

CONFIG = Config(root="r", questions="q.jsonl", context_words=3, rating_words=2)


@pytest.mark.parametrize(
    ("background", "shown"),
    [
        (None, "(none)"),
        ("", "(none)"),
        ("  \n ", "(none)"),
        ("one two", "one two"),
        ("one  two\nthree four five", "one two three"),
    ],
)
def test_query_and_rating_prompts_cut_question_fields_in_words(background, shown):
    row = {"question": "Q?", "background": background, "resolution_date": dt.date(2024, 7, 28)}
    variables = query_stage("steps", CONFIG).variables(row)
    assert variables["background"] == shown and variables["date"] == "2024-07-28"
    question = {"question": "Q?", "background": background, "resolution_criteria": background}
    article = {"title": "Title", "text": "a b c d"}
    rating = relevance_stage(CONFIG, {"q": question}, {"a": article}).variables(
        {"question_id": "q", "article_id": "a"}
    )
    assert rating["background"] == rating["resolution_criteria"] == shown
    assert rating["article"] == "Title. a b"
