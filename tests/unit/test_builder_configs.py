"""Every builder's Config checks its options' ranges and choices from Python too, not only on the
command line: a value the parser would refuse is a ``ValueError`` naming the flag."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pipelines.daily_oracle.config import Config as DailyOracleConfig
from pipelines.openforecast.config import Config as OpenForecastConfig
from pipelines.prophet.config import Config as ProphetConfig
from pipelines.tcelongbench.config import Config as TCELongBenchConfig

VALID: dict[type, dict[str, Any]] = {  # the fields each Config needs to be valid
    DailyOracleConfig: {"dates": (dt.date(2022, 9, 15),)},
    OpenForecastConfig: {},
    ProphetConfig: {"questions": "questions.jsonl"},
    TCELongBenchConfig: {},
}

OUT_OF_RANGE = [  # (Config, field, value, the flag the error names)
    (ProphetConfig, "search_depth", 0, "--search-depth"),
    (ProphetConfig, "num_queries", 0, "--num-queries"),
    (ProphetConfig, "k_max", -1, "--k-max"),
    (ProphetConfig, "rating", "vote", "--rating"),
    (ProphetConfig, "limit", 0, "--limit"),
    (DailyOracleConfig, "n_random", -5, "--random"),
    (DailyOracleConfig, "n_hot", -1, "--hot"),
    (DailyOracleConfig, "article_words", 0, "--article-words"),
    (DailyOracleConfig, "settle_days", -1, "--settle-days"),
    (TCELongBenchConfig, "min_chars", -1, "--min-chars"),
    (TCELongBenchConfig, "max_article_words", 0, "--max-article-words"),
    (TCELongBenchConfig, "min_cluster_size", 1, "--min-cluster-size"),
    (TCELongBenchConfig, "evidence_min_match", 1.5, "--evidence-min-match"),
    (TCELongBenchConfig, "plausible_mode", "loose", "--plausible-mode"),
    (OpenForecastConfig, "max_docs", 0, "--max-docs"),
    (OpenForecastConfig, "timeline_samples", 0, "--timeline-samples"),
]


@pytest.mark.parametrize("valid", VALID.items(), ids=lambda v: v[0].__module__)
def test_the_valid_configs_are_valid(valid):
    cls, fields = valid
    assert cls(root="out", **fields).root == "out"


@pytest.mark.parametrize(
    ("cls", "name", "value", "flag"), OUT_OF_RANGE, ids=[f"{c.__module__}.{n}" for c, n, _, _ in OUT_OF_RANGE]
)
def test_an_out_of_range_value_from_python_is_refused(cls, name, value, flag):
    with pytest.raises(ValueError, match=f"argument {flag}:"):
        cls(root="out", **VALID[cls], **{name: value})
