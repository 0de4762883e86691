"""Evidence per question (spec §2): merging search hits, selecting the top N by rating, and the
check that no kept article was published on or after the question's resolution date D."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from udfs.prophet.cil import cutoff_instant
from udfs.retrieval import LeakageError
from udfs.timeutil import to_utc


def merge_hits(hits: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One candidate per (question, article) from hits carrying ``question_id, article_id,
    published_at, query_type, score``: the query types that found it (sorted), how many queries
    did, and its best search score. Candidates come out sorted by question, then article id."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for h in hits:
        key = (h["question_id"], h["article_id"])
        c = merged.setdefault(
            key,
            {
                "question_id": h["question_id"],
                "article_id": h["article_id"],
                "published_at": h["published_at"],
                "query_types": set(),
                "n_queries": 0,
                "best_score": h["score"],
            },
        )
        c["query_types"].add(h["query_type"])
        c["n_queries"] += 1
        c["best_score"] = max(c["best_score"], h["score"])
    return [{**c, "query_types": sorted(c["query_types"])} for _, c in sorted(merged.items())]


def selection_key(row: Mapping[str, Any]) -> tuple:
    """Top-N order (§8): highest rating, then most recent, then article_id ascending."""
    return (-row["rating"], -to_utc(row["published_at"]).timestamp(), row["article_id"])


def select_evidence(
    rated: Iterable[Mapping[str, Any]], top_n: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, dropped) per question: rating 1 (irrelevant) is never kept (``rating_1``), the rest is
    sorted by ``selection_key``; the first ``top_n`` are kept with their rank (1 = best), the others
    dropped as ``below_top_n``."""
    by_question: dict[str, list[Mapping[str, Any]]] = {}
    for row in rated:
        by_question.setdefault(row["question_id"], []).append(row)
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for qid in sorted(by_question):
        rows = by_question[qid]
        dropped += [{**r, "reason": "rating_1"} for r in rows if r["rating"] <= 1]
        ranked = sorted((r for r in rows if r["rating"] > 1), key=selection_key)
        kept += [{**r, "rank": n} for n, r in enumerate(ranked[:top_n], start=1)]
        dropped += [{**r, "reason": "below_top_n"} for r in ranked[top_n:]]
    return kept, dropped


def check_evidence_cutoff(rows: Iterable[Mapping[str, Any]], resolution_dates: Mapping[str, dt.date]) -> None:
    """Raise LeakageError when any evidence row is undated or published on or after its question's
    D (00:00 UTC of the resolution date). Called on every evidence table before it is used."""
    late = [
        (r["question_id"], r["article_id"], r["published_at"])
        for r in rows
        if r["published_at"] is None
        or to_utc(r["published_at"]) >= cutoff_instant(resolution_dates[r["question_id"]])
    ]
    if late:
        raise LeakageError(f"{len(late)} evidence rows at or after their question's D: {late[:3]}")
