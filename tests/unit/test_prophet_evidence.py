"""Evidence selection (spec §2.4, §8) and the cutoff check on the evidence table (§7.2)."""

import datetime as dt

import pytest

from udfs.prophet.evidence import check_evidence_cutoff, merge_hits, select_evidence
from udfs.retrieval import LeakageError

UTC = dt.UTC
D = dt.date(2024, 7, 28)


def hit(qid, aid, query_type, score, day=20):
    return {
        "question_id": qid,
        "article_id": aid,
        "published_at": dt.datetime(2024, 7, day, tzinfo=UTC),
        "query_type": query_type,
        "score": score,
    }


def test_hits_merge_into_one_candidate_per_question_and_article():
    merged = merge_hits(
        [
            hit("q1", "a", "steps", 1.0),
            hit("q1", "a", "entities", 3.0),
            hit("q1", "a", "steps", 2.0),
            hit("q2", "a", "similar", 0.5),
            hit("q1", "b", "similar", 0.1),
        ]
    )
    assert [(c["question_id"], c["article_id"]) for c in merged] == [("q1", "a"), ("q1", "b"), ("q2", "a")]
    assert merged[0]["query_types"] == ["entities", "steps"]
    assert merged[0]["n_queries"] == 3 and merged[0]["best_score"] == 3.0


def rated(aid, rating, day, qid="q"):
    return {
        "question_id": qid,
        "article_id": aid,
        "rating": rating,
        "published_at": dt.datetime(2024, 7, day, 12, tzinfo=UTC),
    }


def test_top_n_by_rating_then_recency_then_id_and_rating_1_never_kept():
    rows = [
        rated("low", 1, 27),
        rated("old5", 5, 2),
        rated("new5", 5, 20),
        rated("b3", 3, 10),
        rated("a3", 3, 10),
        rated("six", 6, 1),
        rated("other", 2, 3, qid="r"),
    ]
    kept, dropped = select_evidence(rows, top_n=4)
    assert [(r["question_id"], r["article_id"], r["rank"]) for r in kept] == [
        ("q", "six", 1),
        ("q", "new5", 2),
        ("q", "old5", 3),
        ("q", "a3", 4),
        ("r", "other", 1),
    ]
    assert {(r["article_id"], r["reason"]) for r in dropped} == {("low", "rating_1"), ("b3", "below_top_n")}
    kept, dropped = select_evidence([rated("x", 1, 5)], top_n=10)
    assert kept == [] and dropped[0]["reason"] == "rating_1"


def test_evidence_on_or_after_d_fires_the_assertion():
    dates = {"q": D}
    fine = [
        rated("a", 3, 27),
        {**rated("b", 3, 1), "published_at": dt.datetime(2024, 7, 27, 23, 59, tzinfo=UTC)},
    ]
    check_evidence_cutoff(fine, dates)
    for late in (
        dt.datetime(2024, 7, 28, 0, 0, tzinfo=UTC),  # exactly D
        dt.datetime(2024, 7, 28, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),  # 23:00 UTC on D−1 ...
    ):
        row = {**rated("late", 3, 1), "published_at": late}
        if late.astimezone(UTC) >= dt.datetime(2024, 7, 28, tzinfo=UTC):
            with pytest.raises(LeakageError, match="at or after"):
                check_evidence_cutoff([*fine, row], dates)
        else:  # ... which is before D and must pass
            check_evidence_cutoff([*fine, row], dates)
    with pytest.raises(LeakageError):
        check_evidence_cutoff([{**rated("undated", 3, 1), "published_at": None}], dates)
