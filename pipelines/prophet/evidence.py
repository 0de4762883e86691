"""Evidence per question (spec §2): queries, retrieval, relevance ratings and the top-N selection.

1. queries — prompts (a)–(c); a failed list is retried once with sampling; a question left
   without any query searches with its own text (query type ``question``);
2. retrieval — BM25 over the dated articles with the cutoff D inside the search; the union of
   hits per question is the candidate set, checked against each question's D before any rating
   prompt shows it (``LeakageError``);
3. relevance — prompt (d) per candidate;
4. selection — rating 1 never kept, top N by rating, recency, id; checked against D again.

The search runs over one in-memory BM25 index of the whole corpus (``Corpus``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines.llm.ledger import Ledger
from pipelines.prophet.attempts import Attempts, Unit, not_answered
from pipelines.prophet.config import Config
from pipelines.prophet.stages import QUERY_PROMPTS, query_stage, relevance_stage
from pipelines.prophet.tables import CANDIDATE_SCHEMA
from udfs.prophet.cil import bin_index, cutoff_instant
from udfs.prophet.evidence import check_evidence_cutoff, merge_hits, select_evidence
from udfs.prophet.parsing import expected_rating
from udfs.retrieval import BM25Index, Hit
from udfs.schemas import ARTICLES

FALLBACK_QUERY = "question"  # query type of a question's own text when no query was generated
QUESTION = Unit("question", "question_id")
CANDIDATE = Unit("article", "article_id")


@dataclass
class Corpus:
    """The dated articles the search may return, their prompt fields and the BM25 index."""

    articles: dict[str, dict[str, Any]]
    index: BM25Index | None

    @classmethod
    def load(cls, ledger: Ledger, root: str) -> Corpus:
        """The searchable articles; undated and near-duplicate ones are rejected (step ``corpus``)."""
        table = ARTICLES.read(
            root,
            columns=["article_id", "title", "text", "published_at", "url", "near_duplicate_of"],
        )
        step = ledger.step("corpus")
        articles = {}
        for a in table.to_pylist():
            if a["published_at"] is None:
                ledger.drop(step, "no_usable_date", unit="article", item_id=a["article_id"])
            elif a["near_duplicate_of"]:
                ledger.drop(
                    step,
                    "near_duplicate",
                    unit="article",
                    item_id=a["article_id"],
                    detail=a["near_duplicate_of"],
                )
            else:
                articles[a["article_id"]] = a
                ledger.keep(step)
        ledger.close(step)
        ids = sorted(articles)
        index = (
            BM25Index(
                ids,
                [articles[i]["published_at"] for i in ids],
                [f"{articles[i]['title'] or ''}\n{articles[i]['text']}" for i in ids],
            )
            if ids
            else None
        )
        return cls(articles, index)

    def search(self, query: str, resolution_date: dt.date, k: int) -> list[Hit]:
        """BM25 hits strictly before D = 00:00 UTC of the resolution date (cutoff inside the search)."""
        if self.index is None:
            return []
        return self.index.search(query, cutoff_instant(resolution_date), k)

    def n_on_or_after(self, resolution_date: dt.date) -> int:
        """Searchable articles the cutoff of a question resolving on ``resolution_date`` excludes."""
        return len(self.articles) - (self.index.corpus.n_eligible(resolution_date) if self.index else 0)


def generate_queries(
    attempts: Attempts, config: Config, questions: pa.Table
) -> tuple[list[dict[str, Any]], set[str]]:
    """Generated queries per question (a)–(c), with the question-text fallback, and the questions
    whose queries are not known yet (plan mode before the stages ran; they get no queries)."""
    rows = questions.select(["question_id", "question", "background", "resolution_date"])
    found: dict[tuple[str, str], list[str]] = {}
    unknown: set[str] = set()
    for kind in QUERY_PROMPTS:
        outputs = attempts.run(query_stage(kind, config), rows, QUESTION, retries=1)
        unknown |= not_answered(outputs)
        for out in outputs:
            for r in out.filter(out.column("parse_ok")).to_pylist():
                found.setdefault((r["question_id"], kind), r["queries"])
    queries = []
    for q in questions.to_pylist():
        if q["question_id"] in unknown:
            continue
        mine = [
            {"question_id": q["question_id"], "query_type": kind, "query": text}
            for kind in QUERY_PROMPTS
            for text in found.get((q["question_id"], kind), [])
        ]
        queries += mine or [
            {"question_id": q["question_id"], "query_type": FALLBACK_QUERY, "query": q["question"]}
        ]
    return queries, unknown


def retrieve(
    ledger: Ledger,
    config: Config,
    corpus: Corpus,
    queries: list[dict[str, Any]],
    dates: Mapping[str, dt.date],
) -> list[dict[str, Any]]:
    """Search every query with its question's cutoff (sets its ``n_hits``); the union of hits per
    question, checked against each question's D before any prompt shows them."""
    step = ledger.step("retrieval")
    hits = []
    for q in queries:
        found = corpus.search(q["query"], dates[q["question_id"]], config.search_depth)
        q["n_hits"] = len(found)
        hits += [
            {
                "question_id": q["question_id"],
                "article_id": h.doc_id,
                "published_at": h.published_at,
                "query_type": q["query_type"],
                "score": h.score,
            }
            for h in found
        ]
        if found:
            step.rows_written += 1
        else:
            step.reject("no_hits")  # the query stays in the queries table with n_hits = 0
    step.rows_read = len(queries)
    candidates = merge_hits(hits)
    check_evidence_cutoff(candidates, dates)
    step.metrics.update(hits=len(hits), candidates=len(candidates))
    ledger.close(step)
    return candidates


def rate(
    attempts: Attempts,
    config: Config,
    corpus: Corpus,
    questions: Mapping[str, dict[str, Any]],
    candidates: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], set[str]]:
    """Relevance ratings (d) of the candidates (failed rows are rejected by the stage), and the
    questions whose ratings are not known yet (plan mode)."""
    table = pa.Table.from_pylist(
        [{k: r[k] for k in CANDIDATE_SCHEMA.names} for r in candidates], schema=CANDIDATE_SCHEMA
    )
    (out,) = attempts.run(relevance_stage(config, questions, corpus.articles), table, CANDIDATE)
    by_key = {(r["question_id"], r["article_id"]): r for r in candidates}
    rated = [
        {
            **by_key[(row["question_id"], row["article_id"])],
            "rating": row["rating"]
            if config.rating == "generate"
            else expected_rating(row["options"], row["option_probs"]),
        }
        for row in out.filter(out.column("parse_ok")).to_pylist()
    ]
    return rated, not_answered([out])


def select(
    ledger: Ledger, config: Config, corpus: Corpus, rated: list[dict[str, Any]], dates: Mapping[str, dt.date]
) -> list[dict[str, Any]]:
    """Top-N evidence rows per question, checked against each question's D."""
    step = ledger.step("selection")
    kept, dropped = select_evidence(rated, config.top_n)
    for d in dropped:
        ledger.drop(
            step,
            d["reason"],
            unit="article",
            item_id=d["article_id"],
            parent_id=d["question_id"],
            detail=f"rating={d['rating']}",
        )
    ledger.keep(step, len(kept))
    check_evidence_cutoff(kept, dates)
    ledger.close(step)
    return [
        {
            **{k: r[k] for k in ("question_id", "article_id", "published_at", "rating", "rank")},
            "title": corpus.articles[r["article_id"]]["title"],
            "url": corpus.articles[r["article_id"]]["url"],
            "bin": bin_index(r["published_at"], dates[r["question_id"]]),
            "query_types": r["query_types"],
            "n_queries": r["n_queries"],
            "best_score": r["best_score"],
        }
        for r in kept
    ]
