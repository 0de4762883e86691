"""The builder's configuration: one question source, estimator-dependent repeats, bad values refused."""

import pytest

from pipelines.prophet.config import Config


def test_defaults_follow_the_paper():
    c = Config(root="r", questions="q.jsonl")
    assert (c.estimator, c.layout, c.r, c.w, c.k_max, c.top_n, c.tau, c.k) == (
        "verbalized",
        "listed",
        2,
        3,
        10,
        100,
        0.0,
        3,
    )
    assert Config(root="r", questions="q.jsonl", estimator="logprob").r == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"questions": None},  # no source
        {"forecastbench": ("a.json", "b.json")},  # two sources
        {"estimator": "logprob", "repeats": 2},  # logprob is deterministic
        {"repeats": 0},
        {"estimator": "sampled"},
        {"layout": "nested"},
        {"rating": "vote"},
        {"k_max": -1},
        {"top_n": 0},
        {"num_queries": 0},  # the query parser would read 0 as "no limit"
        {"max_words": 0},
    ],
)
def test_bad_configurations_are_refused(changes):
    with pytest.raises(ValueError):
        Config(**({"root": "r", "questions": "q.jsonl"} | changes))


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="limit"):
        Config(root="r", questions="q.jsonl", limit=0)
