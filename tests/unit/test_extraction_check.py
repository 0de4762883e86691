"""The labelled extraction check (bench.extraction_check): its scoring, and the default extractor
against trafilatura on the hand-labelled sample pages."""

from __future__ import annotations

import datetime as dt

import pytest

from bench.extraction_check import evaluate, labelled_pages
from udfs.extraction_check import FIELDS, Label, same_title, score, token_f1


def test_token_f1_is_a_bag_of_lowercase_words():
    assert token_f1("The cat sat", "the CAT sat.") == 1.0
    assert token_f1("a a b", "a b b") == pytest.approx(2 / 3)
    assert token_f1("", "") == 1.0 and token_f1(None, "x") == 0.0 and token_f1("x", "y") == 0.0


def test_scores_of_one_row():
    label = Label("f.warc.gz", 0, "https://x.org/a", "Budget  vote", "2022-09-15", "//p")
    row = {"title": "Budget vote", "text": "one two", "published_date": dt.date(2022, 9, 15)}
    assert score(row, label, "one two three") == {
        "title_exact": 1.0,
        "title_f1": 1.0,
        "date": 1.0,
        "body_f1": 0.8,
    }
    assert score({"reason": "empty"}, label, "x") == {
        "title_exact": 0.0,
        "title_f1": 0.0,
        "date": 0.0,
        "body_f1": 0.0,
    }
    assert same_title("Ｂudget vote", "Budget vote") and not same_title("Budget - vote", "Budget – vote")


@pytest.fixture(scope="module")
def pages(shared_data):
    return labelled_pages(shared_data)


def test_every_label_points_at_its_page_and_has_a_body(pages):
    assert len(pages) >= 40
    assert all(len(reference.split()) >= 20 for _, _, reference in pages)


def test_default_extractor_is_at_least_as_good_as_trafilatura_on_every_field(pages):
    hybrid, trafilatura = evaluate("hybrid", pages), evaluate("trafilatura", pages)
    for field in FIELDS:
        assert hybrid[field] >= trafilatura[field], field
    assert hybrid["title_exact"] > trafilatura["title_exact"]
    assert min(hybrid[f] for f in FIELDS) > 0.9
