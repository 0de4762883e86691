"""Evidence per question (spec §2): queries, retrieval, relevance ratings and the top-N selection.

1. queries — prompts (a)–(c); a failed list is retried once with sampling; a question left
   without any query searches with its own text (query type ``question``);
2. retrieval — BM25 through the article index (``pipelines.index.engine.ArticleIndex``) with the
   cutoff D as the engine's prefilter and marked near-duplicates left out by it; the union of
   hits per question is the candidate set, checked against each question's D before any rating
   prompt shows it (``LeakageError``);
3. relevance — prompt (d) per candidate, its title and text read for the candidates only
   (``Corpus.articles``: their days' partitions of ``corpus/articles``);
4. selection — rating 1 never kept, top N by rating, recency, id; checked against D again.

Nothing here holds the corpus: the ``corpus`` step counts what the search cannot return
(undated articles, near-duplicates) with pushed-down reads, and the only article rows read are
the candidates'. The index is searched and the candidates read in a ``Searcher`` actor, so the
engine's caches stay out of the driver.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import ray

from pipelines.builders import Build
from pipelines.index.engine import ArticleIndex, require_index
from pipelines.llm.ledger import Ledger
from pipelines.llm.ray_env import ensure_ray
from pipelines.prophet.config import Config
from pipelines.prophet.costs import not_answered
from pipelines.prophet.stages import QUERY_PROMPTS, query_stage, relevance_stage
from pipelines.prophet.state import State
from pipelines.prophet.tables import CANDIDATE_SCHEMA
from udfs import storage
from udfs.cli import InputError
from udfs.prophet.cil import bin_index, cutoff_instant
from udfs.prophet.evidence import check_evidence_cutoff, merge_hits, select_evidence
from udfs.prophet.parsing import expected_rating
from udfs.retrieval import Hit
from udfs.schemas import ARTICLES

FALLBACK_QUERY = "question"  # query type of a question's own text when no query was generated
PROMPT_COLUMNS = ["article_id", "title", "text", "url"]  # what the prompts and the evidence table show


class Searcher:
    """The article index, opened once in a Ray actor: LanceDB's caches, the searches' working
    memory and the candidates' day reads grow with the index and the corpus, so they stay out of
    the driver (measured on the scale bench: +37 MB of driver peak for 12 searches, +28 MB for
    the candidates' articles, more at 4× the corpus). Every hit is still checked against its
    cutoff in the engine, and again by the driver (``check_evidence_cutoff``)."""

    def __init__(self, root: str) -> None:
        self.index = ArticleIndex(root)

    def counts(self) -> tuple[int, int]:
        """Indexed articles and indexed near-duplicates."""
        return self.index.table.count_rows(), self.index.table.count_rows("near_duplicate_of IS NOT NULL")

    def search_many(self, queries: list[tuple[str, dt.datetime, None]], k: int) -> list[list[Hit]]:
        return self.index.search_many(queries, k, mode="bm25", text=False, distinct=True)

    def count(self, cutoff: dt.datetime) -> int:
        return self.index.count(cutoff, distinct=True)

    def articles(self, ids: set[str]) -> list[dict[str, Any]]:
        return self.index.articles(ids, PROMPT_COLUMNS).to_pylist()


def searcher(root: str) -> Any:
    """A ``Searcher`` actor on the index of ``root``; it waits on the engine and holds no CPU (a
    Ray Data stage of the same run needs them). It ends with the last handle to it."""
    return ray.remote(num_cpus=0)(Searcher).remote(root)


@dataclass
class Corpus:
    """The searchable articles: a ``Searcher`` actor on the article index of the root (``None``
    when the corpus holds no dated article, so there is nothing to search) and how many articles
    a search may return."""

    root: str
    index: Any  # a Searcher actor's handle, or None
    searchable: int
    not_searchable: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, ledger: Ledger, root: str) -> Corpus:
        """Open the index and count the corpus (step ``corpus``: undated articles are rejected as
        ``no_usable_date``, marked near-duplicates as ``near_duplicate``) from pushed-down reads,
        never a row per article. A missing or out-of-date index is an ``InputError``."""
        uri = ARTICLES.uri(root)
        dated = ds.field("published_at").is_valid()
        total = storage.count_rows(uri)
        n_dated = storage.count_rows(uri, dated)
        duplicates = storage.count_rows(uri, dated & ds.field("near_duplicate_of").is_valid())
        index = None
        if n_dated:
            require_index(root)
            ensure_ray(ledger.runner.llm)
            index = searcher(root)
            indexed = ray.get(index.counts.remote())
            if indexed != (n_dated, duplicates):
                raise InputError(
                    f"the article index at {root} is out of date ({indexed[0]} articles, {indexed[1]} "
                    f"near-duplicates; corpus/articles has {n_dated} dated, {duplicates} near-duplicates): "
                    f"run python -m pipelines.index --root {root}"
                )
        not_searchable = {"no_usable_date": total - n_dated, "near_duplicate": duplicates}
        step = ledger.step("corpus")
        step.rows_read = total
        step.rows_written = n_dated - duplicates
        for reason, n in not_searchable.items():
            if n:
                step.reject(reason, n)
        step.notes.append("counted, not listed: these articles have no rows in rejected")
        ledger.close(step)
        return cls(root, index, n_dated - duplicates, not_searchable)

    def search_many(self, queries: list[tuple[str, dt.date]], k: int) -> list[list[Hit]]:
        """For each ``(query, resolution date)``, the top ``k`` BM25 hits published strictly before
        D = 00:00 UTC of that date (the engine's prefilter, every hit asserted), near-duplicates
        left out; several searches in flight at once in the engine."""
        if self.index is None:
            return [[] for _ in queries]
        searches = [(query, cutoff_instant(date), None) for query, date in queries]
        return ray.get(self.index.search_many.remote(searches, k))  # ids: prompt fields from ``articles``

    def n_on_or_after(self, resolution_date: dt.date) -> int:
        """Searchable articles the cutoff of a question resolving on ``resolution_date`` excludes."""
        if self.index is None:
            return 0
        return self.searchable - ray.get(self.index.count.remote(cutoff_instant(resolution_date)))

    def articles(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The prompt fields (``PROMPT_COLUMNS``) of these articles by id, read from their days'
        partitions of ``corpus/articles`` only (a working set, never the corpus)."""
        wanted = set(ids)
        if not wanted:
            return {}
        assert self.index is not None, "articles asked of a corpus without an index"
        found = {r["article_id"]: r for r in ray.get(self.index.articles.remote(wanted))}
        missing = wanted - found.keys()
        if missing:
            raise InputError(
                f"{len(missing)} indexed articles are not in corpus/articles (e.g. {min(missing)}): "
                f"run python -m pipelines.index --root {self.root}"
            )
        return found


def open_corpus(b: Build[Config], s: State) -> None:
    """The searchable articles and their index (``Corpus.open``: the ``corpus`` step)."""
    s.corpus = Corpus.open(b.ledger, b.config.root)


def generate_queries(b: Build[Config], s: State) -> None:
    """Generated queries per question (a)–(c), a failed list asked once more, with the
    question-text fallback (``s.queries``), and the questions whose queries are not known yet
    (``s.unknown_queries``: plan mode before the stages ran; they get no queries)."""
    assert s.questions is not None
    rows = s.questions.select(["question_id", "question", "background", "resolution_date"])
    found: dict[tuple[str, str], list[str]] = {}
    unknown: set[str] = set()
    for kind in QUERY_PROMPTS:
        out = b.ledger.run(
            query_stage(kind, b.config), rows, unit="question", id_column="question_id", retries=1
        )
        s.costs.add(out)
        unknown |= not_answered(out)
        for r in out.filter(out.column("parse_ok")).to_pylist():  # first attempts first
            found.setdefault((r["question_id"], kind), r["queries"])
    queries = []
    for q in s.questions.to_pylist():
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
    s.queries, s.unknown_queries = queries, unknown


def retrieve(b: Build[Config], s: State) -> None:
    """Search every query with its question's cutoff (sets its ``n_hits``); ``s.candidates``: the
    union of hits per question, checked against each question's D before any prompt shows them,
    and their prompt fields (``s.articles``, read for the candidates only)."""
    assert s.corpus is not None
    step = b.ledger.step("retrieval")
    hits = []
    searched = s.corpus.search_many(
        [(q["query"], s.dates[q["question_id"]]) for q in s.queries], b.config.search_depth
    )
    for q, found in zip(s.queries, searched, strict=True):
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
    step.rows_read = len(s.queries)
    candidates = merge_hits(hits)
    check_evidence_cutoff(candidates, s.dates)
    step.metrics.update(hits=len(hits), candidates=len(candidates))
    b.ledger.close(step)
    s.candidates = candidates
    s.articles = s.corpus.articles(c["article_id"] for c in candidates)


def rate(b: Build[Config], s: State) -> None:
    """Relevance ratings (d) of the candidates (failed rows are rejected by the stage);
    ``s.unknown_evidence``: the questions whose queries or ratings are not known yet (plan mode)."""
    table = pa.Table.from_pylist(
        [{k: r[k] for k in CANDIDATE_SCHEMA.names} for r in s.candidates], schema=CANDIDATE_SCHEMA
    )
    stage = relevance_stage(b.config, s.qrows, s.articles)
    out = b.ledger.run(stage, table, unit="article", id_column="article_id", parent_column="question_id")
    s.costs.add(out)
    by_key = {(r["question_id"], r["article_id"]): r for r in s.candidates}
    s.rated = [
        {
            **by_key[(row["question_id"], row["article_id"])],
            "rating": row["rating"]
            if b.config.rating == "generate"
            else expected_rating(row["options"], row["option_probs"]),
        }
        for row in out.filter(out.column("parse_ok")).to_pylist()
    ]
    s.unknown_evidence = s.unknown_queries | not_answered(out)


def select(b: Build[Config], s: State) -> None:
    """Top-N evidence rows per question of the known ratings (title and url from
    ``s.articles``), checked against each question's D."""
    ledger, articles, dates = b.ledger, s.articles, s.dates
    step = ledger.step("selection")
    rated = [r for r in s.rated if r["question_id"] not in s.unknown_evidence]
    kept, dropped = select_evidence(rated, b.config.top_n)
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
    s.evidence = [
        {
            **{k: r[k] for k in ("question_id", "article_id", "published_at", "rating", "rank")},
            "title": articles[r["article_id"]]["title"],
            "url": articles[r["article_id"]]["url"],
            "bin": bin_index(r["published_at"], dates[r["question_id"]]),
            "query_types": r["query_types"],
            "n_queries": r["n_queries"],
            "best_score": r["best_score"],
        }
        for r in kept
    ]
