"""The PROPHET builder: evidence per question, exact CIL per article, and the L1/L2 split.

Stages (spec ``prophet.md``, ``docs/prophet.md``):

1. questions — ForecastBench (question set + resolution set) or a JSONL/Parquet file;
2. query generation — three LLM stages, prompts (a) entities/events, (b) resolving steps,
   (c) similar events; a failed parse is retried once with sampling; a question left without
   any query searches with its own text;
3. retrieval — BM25 over the dated articles with the cutoff D inside the search; the union of
   hits per question is the candidate set, checked against each question's D before any rating
   prompt shows it (``LeakageError``);
4. relevance — prompt (d) per candidate (generated "Rating: n", or scored over 1–6);
5. selection — rating 1 never kept, top N by rating, recency, id; the evidence table is checked
   against each question's D again;
6. CIL — ``udfs.prophet.plan`` lists the joint terms once per window and the conditional terms
   once per (article, x, assignment); two LLM stages answer them (``verbalized``: r sampled
   repeats, failed parses retried; ``logprob``: one Yes/No forward pass); ``assemble`` computes
   CIL; the L1/L2 rule splits the questions.

Outputs under ``benchmarks/prophet/``: questions (by split), evidence, cil, joint_tables,
queries, dropped, eval_items (by split) and the dataset card. Every dropped row is in
``dropped`` with its stage and reason, and every step's counts reconcile.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.benchmarks import write_benchmark_table, write_card, write_eval_items
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import plan_table
from udfs.ids import stable_seed
from udfs.prompts import load_prompt
from udfs.prophet.cil import EvidenceArticle, bin_index, cutoff_instant, split_question
from udfs.prophet.evidence import check_evidence_cutoff, merge_hits, select_evidence
from udfs.prophet.layout import (
    ESTIMATORS,
    LAYOUTS,
    PromptArticle,
    conditional_variables,
    joint_variables,
    prompt_ids,
    snippet,
)
from udfs.prophet.parsing import expected_rating, parse_query_list, parse_rating
from udfs.prophet.plan import ConditionalTerm, JointTerm, QuestionPlan, assemble, cost_formulas, plan_question
from udfs.questions import QUESTIONS_SCHEMA, forecastbench_questions, load_questions_file
from udfs.report import RunSummary, combined_table
from udfs.retrieval import BM25Index, Hit
from udfs.schemas import ARTICLES, UTC_TS

NAME = "prophet"
NOT_RUN = "engine: not run (--plan)"
RATING_MODES = ("generate", "score")
QUERY_PROMPTS = {
    "entities": "prophet.query_entities",
    "steps": "prophet.query_steps",
    "similar": "prophet.query_similar",
}
FALLBACK_QUERY = "question"  # query type of a question's own text when no query was generated
RETRY_TEMPERATURE = 0.7  # retries of greedy prompts sample, or they would repeat the same answer

QUERIES_PARSED = pa.schema([pa.field("queries", pa.list_(pa.string()))])
RATING_PARSED = pa.schema([pa.field("rating", pa.int32())])

DROPPED_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string()),  # null for corpus-level drops
        pa.field("article_id", pa.string()),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
    ]
)
QUERY_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("query_type", pa.string(), nullable=False),
        pa.field("query", pa.string(), nullable=False),
        pa.field("n_hits", pa.int32()),
    ]
)
EVIDENCE_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("published_at", UTC_TS, nullable=False),
        pa.field("title", pa.string()),
        pa.field("url", pa.string()),
        pa.field("rating", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("query_types", pa.list_(pa.string())),
        pa.field("n_queries", pa.int32()),
        pa.field("best_score", pa.float64()),
    ]
)
CIL_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("window_ids", pa.list_(pa.string())),
        pa.field("k", pa.int32()),
        pa.field("k_raw", pa.int32()),
        pa.field("truncated", pa.bool_()),
        pa.field("p_do1", pa.float64()),  # P(Y=Ŷ | do(X_i=1))
        pa.field("p_do0", pa.float64()),  # P(Y=Ŷ | do(X_i=0))
        pa.field("cil", pa.float64()),
        pa.field("joint_uniform_fallback", pa.bool_()),  # Σq = 0: uniform π used (§8)
        pa.field("status", pa.string()),  # ok | failed
        pa.field("reason", pa.string()),
        pa.field("estimator", pa.string()),
        pa.field("repeats", pa.int32()),
        pa.field("layout", pa.string()),
        pa.field("model", pa.string()),
    ]
)
JOINT_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("bits", pa.string(), nullable=False),  # character j = status of window article j
        pa.field("window_ids", pa.list_(pa.string())),
        pa.field("q_raw", pa.float64()),
        pa.field("pi", pa.float64()),
        pa.field("uniform_fallback", pa.bool_()),
    ]
)
QUESTION_OUT_SCHEMA = pa.schema(
    [
        *QUESTIONS_SCHEMA,
        pa.field("split", pa.string(), nullable=False),  # L1 | L2 | none
        pa.field("reason", pa.string()),
        pa.field("n_queries", pa.int32()),
        pa.field("queries_fallback", pa.bool_()),
        pa.field("n_candidates", pa.int32()),
        pa.field("n_evidence", pa.int32()),
        pa.field("n_cil_ok", pa.int32()),
        pa.field("n_above_tau", pa.int32()),
        pa.field("n_corpus_on_or_after_D", pa.int32()),  # articles the cutoff kept out of the search
        pa.field("llm_requests", pa.int32()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Config:
    """Everything a run depends on; defaults follow the spec (paper values where it has them)."""

    root: str
    questions: str | None = None  # a JSONL or Parquet file of questions
    forecastbench: tuple[str, str] | None = None  # (question set, resolution set) JSON files
    question_ids: tuple[str, ...] = ()  # keep only these questions (all when empty)
    llm: LLMConfig = field(default_factory=LLMConfig)
    force: bool = False
    plan: bool = False
    evidence_only: bool = False  # stop after the evidence (then --plan gives exact CIL counts)
    seed: int = 0
    # evidence (§2, §8)
    num_queries: int = 5
    max_words: int = 8
    search_depth: int = 50  # BM25 hits per query
    rating: str = "generate"  # generate: paper prompt (d); score: expected rating over 1-6 (one pass)
    top_n: int = 100
    context_words: int = 200  # background and resolution criteria cut for the prompts
    rating_words: int = 400  # article text cut for the rating prompt
    max_tokens: int | None = None  # caps every generate prompt's max_tokens (demo/test limit)
    # CIL (§3, §7)
    estimator: str = "verbalized"
    layout: str = "listed"
    repeats: int | None = None  # r; default 2 for verbalized, always 1 for logprob
    w: int = 3
    k_max: int = 10
    cil_words: int = 60  # words of each article (after its title) in the CIL prompts
    retries: int = 2  # verbalized parse failures retried with new seeds
    tau: float = 0.0
    k: int = 3

    def __post_init__(self) -> None:
        if (self.questions is None) == (self.forecastbench is None):
            raise ValueError("give exactly one of questions (a file) and forecastbench (two files)")
        if self.estimator not in ESTIMATORS or self.layout not in LAYOUTS or self.rating not in RATING_MODES:
            raise ValueError(f"estimator ∈ {ESTIMATORS}, layout ∈ {LAYOUTS}, rating ∈ {RATING_MODES}")
        if self.estimator == "logprob" and self.repeats not in (None, 1):
            raise ValueError("the logprob estimator is deterministic: repeats must be 1")
        if self.r < 1 or self.w < 1 or self.k_max < 0 or self.top_n < 1 or self.k < 1:
            raise ValueError("repeats, w, top_n and k must be positive; k_max >= 0")
        if self.num_queries < 1 or self.max_words < 1:
            raise ValueError("num_queries and max_words must be positive (0 would mean no limit)")

    @property
    def r(self) -> int:
        if self.repeats is not None:
            return self.repeats
        return 2 if self.estimator == "verbalized" else 1


@dataclass
class Result:
    """The benchmark's tables by name and every step's summary."""

    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    card: dict[str, Any] | None
    plan: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Corpus:
    """The dated articles the search may return, their prompt fields and the BM25 index."""

    articles: dict[str, dict[str, Any]]
    index: BM25Index | None
    dropped: list[dict[str, Any]]

    @classmethod
    def load(cls, root: str) -> _Corpus:
        table = ARTICLES.read(
            root,
            columns=["article_id", "title", "text", "published_at", "url", "near_duplicate_of"],
        )
        articles, dropped = {}, []
        for a in table.to_pylist():
            if a["published_at"] is None:
                dropped.append(_drop(None, a["article_id"], "corpus", "no_usable_date"))
            elif a["near_duplicate_of"]:
                dropped.append(
                    _drop(None, a["article_id"], "corpus", "near_duplicate", a["near_duplicate_of"])
                )
            else:
                articles[a["article_id"]] = a
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
        return cls(articles, index, dropped)

    def n_on_or_after(self, resolution_date: dt.date) -> int:
        return len(self.articles) - (self.index.corpus.n_eligible(resolution_date) if self.index else 0)


def _drop(
    question_id: str | None, article_id: str | None, stage: str, reason: str, detail: str | None = None
) -> dict[str, Any]:
    return {
        "question_id": question_id,
        "article_id": article_id,
        "stage": stage,
        "reason": reason,
        "detail": detail,
    }


def _words(text: str | None, n: int) -> str:
    return " ".join((text or "").split()[:n]) or "(none)"


def _search(index: BM25Index, query: str, resolution_date: dt.date, k: int) -> list[Hit]:
    """BM25 hits strictly before D = 00:00 UTC of the resolution date (cutoff inside the search)."""
    return index.search(query, cutoff_instant(resolution_date), k)


class _Costs:
    """LLM requests and tokens per question and stage group: the unique request keys of every
    stage output. The groups are the first attempts (queries, relevance, joint, conditional) and
    ``retries`` (every retry stage)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], dict[str, tuple[int, int]]] = defaultdict(dict)

    def add(self, out: pa.Table, stage_name: str) -> None:
        if "_retry" in stage_name:
            group = "retries"
        else:
            group = "queries" if stage_name.startswith("query_") else stage_name
        cols = out.select(["question_id", "request_key", "input_tokens", "output_tokens"]).to_pylist()
        for row in cols:
            if row["request_key"]:
                self.keys[(row["question_id"], group)][row["request_key"]] = (
                    row["input_tokens"] or 0,
                    row["output_tokens"] or 0,
                )

    def requests(self, question_id: str, group: str) -> int:
        return len(self.keys.get((question_id, group), {}))

    def of(self, question_id: str) -> tuple[int, int, int]:
        """(requests, input tokens, output tokens) of one question over all its stages."""
        keys = {k: v for (qid, _), found in self.keys.items() if qid == question_id for k, v in found.items()}
        return len(keys), sum(v[0] for v in keys.values()), sum(v[1] for v in keys.values())


class _Builder:
    """One run: the runner, the per-step summaries, dropped rows and per-question costs."""

    def __init__(self, config: Config):
        self.config = config
        self.runner = StageRunner(config.root, NAME, config.llm, force=config.force, plan_only=config.plan)
        self.summaries: list[RunSummary] = []
        self.dropped: list[dict[str, Any]] = []
        self.costs = _Costs()

    # ------------------------------------------------------------------ LLM helpers
    def sampling(self, prompt_id: str) -> dict[str, Any]:
        """The ``max_tokens`` cap of a generate/verbalized prompt, if the config sets one."""
        prompt = load_prompt(prompt_id)
        if self.config.max_tokens is None or prompt.kind == "choice":
            return {}
        return {"max_tokens": min(self.config.max_tokens, prompt.sampling.get("max_tokens", 256))}

    def run_stage(self, stage: LLMStage, rows: pa.Table, reason: str, retries: int = 0) -> list[pa.Table]:
        """Run a stage, then retry its failed rows (new seeds, sampling) up to ``retries`` times.
        Returns the first output and every retry's output; each is accounted and its failed rows
        are recorded in ``dropped`` under ``reason``. A retried row keeps its sample slot in
        ``slot``. In plan mode a row whose cached answer failed is retried like in a run (so the
        cached retry answers are read and counted); a row not run yet is not."""
        outputs = [self._run(stage, rows, reason)]
        temperature = stage.sampling.get("temperature", stage.prompt.sampling.get("temperature", 0.0))
        for attempt in range(1, retries + 1):
            last = outputs[-1]
            not_run = pc.fill_null(pc.equal(last.column("parse_error"), NOT_RUN), False)
            failed = last.filter(pc.invert(pc.or_(last.column("parse_ok"), not_run)))
            if failed.num_rows == 0:
                break
            slots = failed.column("slot" if "slot" in failed.column_names else "sample_index").to_pylist()
            again = failed.select([c for c in rows.column_names if c != "slot"])
            again = again.append_column("slot", pa.array(slots, pa.int32()))
            again = again.append_column(
                "retry_sampling",
                pa.array(
                    [
                        json.dumps({"seed": stable_seed(self.config.seed, stage.name, attempt, slot)})
                        for slot in slots
                    ]
                ),
            )
            retry = dataclasses.replace(
                stage,
                name=f"{stage.name}_retry{attempt}",
                samples=1,
                sampling={**stage.sampling, "temperature": temperature or RETRY_TEMPERATURE},
                sampling_column="retry_sampling",
            )
            outputs.append(self._run(retry, again, reason))
        return outputs

    def _run(self, stage: LLMStage, rows: pa.Table, reason: str) -> pa.Table:
        out = self.runner.run(stage, rows)
        self.costs.add(out, stage.name)
        if not self.config.plan:
            for row in out.filter(pc.invert(out.column("parse_ok"))).to_pylist():
                self.dropped.append(
                    _drop(row["question_id"], row.get("article_id"), stage.name, reason, row["parse_error"])
                )
        return out

    def step(self, name: str) -> RunSummary:
        summary = RunSummary(name=f"{NAME}/{name}")
        self.summaries.append(summary)
        return summary


def _slot(row: dict[str, Any]) -> int:
    return row["slot"] if row.get("slot") is not None else row["sample_index"]


def load_questions(config: Config) -> tuple[pa.Table, dict[str, int]]:
    """The questions of the run and the importer's skip counts."""
    if config.forecastbench:
        table, skipped = forecastbench_questions(*config.forecastbench)
    else:
        table, skipped = load_questions_file(config.questions), {}  # type: ignore[arg-type]
    if config.question_ids:
        missing = set(config.question_ids) - set(table.column("question_id").to_pylist())
        if missing:
            raise ValueError(f"unknown question ids: {sorted(missing)}")
        table = table.filter(pc.is_in(table.column("question_id"), pa.array(list(config.question_ids))))
    return table, skipped


# ---------------------------------------------------------------------------------- evidence
def _queries(b: _Builder, questions: pa.Table) -> tuple[list[dict[str, Any]], set[str]]:
    """Generated queries per question (a)–(c), with the question-text fallback, and the questions
    whose queries are not known yet (plan mode before the stages ran; they get no queries)."""
    c = b.config

    def variables(row: dict[str, Any]) -> dict[str, Any]:
        return {
            "question": row["question"],
            "background": _words(row["background"], c.context_words),
            "date": row["resolution_date"].isoformat(),
            "num_queries": c.num_queries,
            "max_words": c.max_words,
        }

    rows = questions.select(["question_id", "question", "background", "resolution_date"])
    found: dict[tuple[str, str], list[str]] = {}
    unknown: set[str] = set()
    for kind, prompt_id in QUERY_PROMPTS.items():
        stage = LLMStage(
            f"query_{kind}",
            prompt_id,
            parser=partial(parse_query_list, limit=None if kind == "entities" else c.num_queries),
            parsed_schema=QUERIES_PARSED,
            variables=variables,
            sampling=b.sampling(prompt_id),
            seed=c.seed,
        )
        outputs = b.run_stage(stage, rows, "query_parse_failure", retries=1)
        unknown |= _unknown(outputs)
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


def _candidates(
    b: _Builder, corpus: _Corpus, queries: list[dict[str, Any]], dates: dict[str, dt.date]
) -> list[dict[str, Any]]:
    """Search every query with its question's cutoff; the union of hits per question, checked
    against each question's D before any prompt shows them (``LeakageError``)."""
    step = b.step("retrieval")
    hits = []
    for q in queries:
        found = (
            _search(corpus.index, q["query"], dates[q["question_id"]], b.config.search_depth)
            if corpus.index
            else []
        )
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
            step.reject("no_hits")
    step.rows_read = len(queries)
    candidates = merge_hits(hits)
    check_evidence_cutoff(candidates, dates)
    step.metrics.update(hits=len(hits), candidates=len(candidates))
    step.finish()
    return candidates


def _rate(
    b: _Builder, corpus: _Corpus, questions: dict[str, dict[str, Any]], candidates: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], set[str]]:
    """Relevance ratings (d) of the candidates (failures are dropped as ``rating_parse_failure``),
    and the questions with ratings not known yet (plan mode)."""
    c = b.config

    def variables(row: dict[str, Any]) -> dict[str, Any]:
        q, a = questions[row["question_id"]], corpus.articles[row["article_id"]]
        return {
            "question": q["question"],
            "background": _words(q["background"], c.context_words),
            "resolution_criteria": _words(q["resolution_criteria"], c.context_words),
            "article": snippet(a["title"], a["text"], c.rating_words),
        }

    table = pa.Table.from_pylist(
        [{k: r[k] for k in ("question_id", "article_id", "published_at")} for r in candidates],
        schema=pa.schema(
            [("question_id", pa.string()), ("article_id", pa.string()), ("published_at", UTC_TS)]
        ),
    )
    if c.rating == "generate":
        stage = LLMStage(
            "relevance",
            "prophet.relevance",
            parser=parse_rating,
            parsed_schema=RATING_PARSED,
            variables=variables,
            sampling=b.sampling("prophet.relevance"),
        )
    else:
        stage = LLMStage("relevance", "prophet.relevance_score", variables=variables)
    (out,) = b.run_stage(stage, table, "rating_parse_failure")
    by_key = {(r["question_id"], r["article_id"]): r for r in candidates}
    rated = [
        {
            **by_key[(row["question_id"], row["article_id"])],
            "rating": row["rating"]
            if c.rating == "generate"
            else expected_rating(row["options"], row["option_probs"]),
        }
        for row in out.filter(out.column("parse_ok")).to_pylist()
    ]
    return rated, _unknown([out])


def _select(
    b: _Builder, corpus: _Corpus, rated: list[dict[str, Any]], dates: dict[str, dt.date]
) -> list[dict[str, Any]]:
    """Top-N evidence per question, checked against each question's D."""
    step = b.step("selection")
    kept, dropped = select_evidence(rated, b.config.top_n)
    for d in dropped:
        b.dropped.append(
            _drop(d["question_id"], d["article_id"], "selection", d["reason"], f"rating={d['rating']}")
        )
        step.reject(d["reason"])
    step.rows_read, step.rows_written = len(rated), len(kept)
    check_evidence_cutoff(kept, dates)
    step.finish()
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


# ---------------------------------------------------------------------------------- CIL
JOINT_REQUESTS = pa.schema(
    [
        pa.field("question_id", pa.string()),
        pa.field("bin", pa.int32()),
        pa.field("bits", pa.string()),
        pa.field("window_ids", pa.list_(pa.string())),
    ]
)
CONDITIONAL_REQUESTS = pa.schema(
    [*JOINT_REQUESTS, pa.field("article_id", pa.string()), pa.field("x", pa.int8())]
)


def plan_requests(plans: dict[str, QuestionPlan]) -> tuple[pa.Table, pa.Table]:
    """The request tables of the CIL stages: one row per unique joint term and per conditional
    term of every question (the stages add the r repeats)."""
    joints = [
        {"question_id": qid, "bin": t.bin, "bits": t.bits, "window_ids": list(t.window_ids)}
        for qid, plan in plans.items()
        for t in plan.joints
    ]
    conditionals = [
        {
            "question_id": qid,
            "bin": t.bin,
            "bits": t.bits,
            "window_ids": list(t.window_ids),
            "article_id": t.article_id,
            "x": t.x,
        }
        for qid, plan in plans.items()
        for t in plan.conditionals
    ]
    return (
        pa.Table.from_pylist(joints, schema=JOINT_REQUESTS),
        pa.Table.from_pylist(conditionals, schema=CONDITIONAL_REQUESTS),
    )


def cil_stages(
    config: Config, articles: dict[str, PromptArticle], question_texts: dict[str, str], sampling: Callable
) -> tuple[LLMStage, LLMStage]:
    """The joint and conditional stages of the configured estimator and layout."""
    joint_id, conditional_id = prompt_ids(config.estimator, config.layout)

    def joint_vars(row: dict[str, Any]) -> dict[str, Any]:
        term = JointTerm(row["bin"], tuple(row["window_ids"]), row["bits"])
        return joint_variables(term, articles, config.layout)

    def conditional_vars(row: dict[str, Any]) -> dict[str, Any]:
        term = ConditionalTerm(row["article_id"], row["bin"], row["x"], tuple(row["window_ids"]), row["bits"])
        return conditional_variables(term, articles, question_texts[row["question_id"]], config.layout)

    return (
        LLMStage(
            "joint",
            joint_id,
            variables=joint_vars,
            samples=config.r,
            sampling=sampling(joint_id),
            seed=config.seed,
        ),
        LLMStage(
            "conditional",
            conditional_id,
            variables=conditional_vars,
            samples=config.r,
            sampling=sampling(conditional_id),
            seed=config.seed,
        ),
    )


def term_probability(row: dict[str, Any], estimator: str) -> float:
    """P(Yes) of one answered term: the parsed decimal, or P(Yes)/(P(Yes)+P(No)) for logprob."""
    if estimator == "verbalized":
        return row["prob"]
    return row["option_probs"][row["options"].index("Yes")]


def term_values(
    outputs: list[pa.Table], key: Callable[[dict[str, Any]], tuple], r: int, estimator: str
) -> dict[tuple, float | None]:
    """Each term's mean over its r sample slots (a retry fills its slot); None when a slot failed
    for good. Keys are ``(question_id, *key(row))``."""
    slots: dict[tuple, dict[int, float]] = defaultdict(dict)
    for out in outputs:
        for row in out.filter(out.column("parse_ok")).to_pylist():
            slots[(row["question_id"], *key(row))][_slot(row)] = term_probability(row, estimator)
    terms = {(row["question_id"], *key(row)) for row in outputs[0].to_pylist()}
    return {t: math.fsum(slots[t].values()) / r if len(slots[t]) == r else None for t in terms}


def _joint_key(row: dict[str, Any]) -> tuple:
    return (tuple(row["window_ids"]), row["bits"])


def _conditional_key(row: dict[str, Any]) -> tuple:
    return (row["article_id"], row["x"], row["bits"])


def _cil(
    b: _Builder, questions: dict[str, dict[str, Any]], evidence: list[dict[str, Any]], corpus: _Corpus
) -> tuple[dict[str, QuestionPlan], list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    """Plans, CIL rows and joint-table rows of the questions with evidence, and the questions whose
    CIL terms are unknown (plan mode before the stages ran)."""
    c = b.config
    by_question: dict[str, list[EvidenceArticle]] = defaultdict(list)
    for e in evidence:
        by_question[e["question_id"]].append(EvidenceArticle(e["article_id"], e["published_at"], e["rating"]))
    plans = {
        qid: plan_question(qid, questions[qid]["resolution_date"], arts, c.w, c.k_max)
        for qid, arts in sorted(by_question.items())
    }
    shown = {
        e["article_id"]: PromptArticle(
            e["published_at"].date().isoformat(),
            snippet(
                corpus.articles[e["article_id"]]["title"],
                corpus.articles[e["article_id"]]["text"],
                c.cil_words,
            ),
        )
        for e in evidence
    }
    joint_stage, conditional_stage = cil_stages(
        c, shown, {qid: q["question"] for qid, q in questions.items()}, b.sampling
    )
    joints, conditionals = plan_requests(plans)
    retries = c.retries if c.estimator == "verbalized" else 0
    joint_out = b.run_stage(joint_stage, joints, "joint_term_failure", retries)
    conditional_out = b.run_stage(conditional_stage, conditionals, "conditional_term_failure", retries)
    unknown = _unknown(joint_out + conditional_out)
    if c.plan:
        return plans, [], [], unknown
    joint_values = term_values(joint_out, _joint_key, c.r, c.estimator)
    conditional_values = term_values(conditional_out, _conditional_key, c.r, c.estimator)
    cil_rows: list[dict[str, Any]] = []
    joint_rows: list[dict[str, Any]] = []
    step = b.step("cil")
    for qid, plan in plans.items():
        rows, table = assemble(
            plan,
            questions[qid]["answer"],
            {k[1:]: v for k, v in joint_values.items() if k[0] == qid},
            {k[1:]: v for k, v in conditional_values.items() if k[0] == qid},
        )
        extra = {"estimator": c.estimator, "repeats": c.r, "layout": c.layout, "model": c.llm.model}
        cil_rows += [{**row, **extra} for row in rows]
        joint_rows += table
    for row in cil_rows:
        if row["status"] == "ok":
            step.rows_written += 1
        else:
            step.reject(row["reason"])
            b.dropped.append(_drop(row["question_id"], row["article_id"], "cil", row["reason"]))
    step.rows_read = len(evidence)
    step.finish()
    return plans, cil_rows, joint_rows, unknown


def _unknown(outputs: list[pa.Table]) -> set[str]:
    """Questions with a row (first attempt or retry) the engine has not answered yet (plan mode)."""
    rows = [r for out in outputs for r in out.select(["question_id", "parse_error"]).to_pylist()]
    return {r["question_id"] for r in rows if r["parse_error"] == NOT_RUN}


# ---------------------------------------------------------------------------------- run
def run(config: Config) -> Result:
    """Build the benchmark (or, with ``plan``, print the LLM requests per question and stop)."""
    b = _Builder(config)
    questions, skipped = load_questions(config)
    qrows = {q["question_id"]: q for q in questions.to_pylist()}
    dates = {qid: q["resolution_date"] for qid, q in qrows.items()}
    corpus = _Corpus.load(config.root)
    b.dropped += corpus.dropped
    queries, unknown = _queries(b, questions)
    candidates = _candidates(b, corpus, queries, dates)
    rated, unknown_ratings = _rate(b, corpus, qrows, candidates)
    unknown_evidence = unknown | unknown_ratings
    evidence = _select(b, corpus, [r for r in rated if r["question_id"] not in unknown_evidence], dates)
    plans: dict[str, QuestionPlan] = {}
    cil_rows: list[dict[str, Any]] = []
    joint_rows: list[dict[str, Any]] = []
    if not config.evidence_only:
        plans, cil_rows, joint_rows, _ = _cil(b, qrows, evidence, corpus)
    summaries = sorted(b.runner.summaries + b.summaries, key=lambda s: s.started_at)
    if config.plan:
        rows = plan_rows(b, qrows, plans, unknown, unknown_evidence)
        print(plan_table(b.runner.plans))
        print(format_plan(rows))
        return Result({}, summaries, None, rows)
    tables = {
        "queries": pa.Table.from_pylist(queries, schema=QUERY_SCHEMA),
        "evidence": pa.Table.from_pylist(evidence, schema=EVIDENCE_SCHEMA),
        "dropped": pa.Table.from_pylist(b.dropped, schema=DROPPED_SCHEMA),
    }
    if not config.evidence_only:
        question_rows = _question_rows(b, qrows, queries, candidates, evidence, cil_rows, corpus)
        summaries.append(_split_summary(question_rows))
        tables |= {
            "cil": pa.Table.from_pylist(cil_rows, schema=CIL_SCHEMA),
            "joint_tables": pa.Table.from_pylist(joint_rows, schema=JOINT_SCHEMA),
            "questions": pa.Table.from_pylist(question_rows, schema=QUESTION_OUT_SCHEMA),
        }
    unbalanced = [s.name for s in summaries if not s.reconciles]
    if unbalanced:
        raise AssertionError(f"counts do not reconcile in {unbalanced}")
    for name, table in tables.items():
        write_benchmark_table(config.root, NAME, name, table, ("split",) if name == "questions" else ())
    card = None
    if not config.evidence_only:
        tables["eval_items"] = write_eval_items(config.root, NAME, eval_items(question_rows, evidence))
        card = write_card(config.root, NAME, b.runner, _counts(tables, skipped, corpus), config)
    print(combined_table(summaries, f"{NAME} on {config.llm.backend}:{config.llm.model}"))
    return Result(tables, summaries, card)


def _question_rows(
    b: _Builder,
    qrows: dict[str, dict[str, Any]],
    queries: list[dict[str, Any]],
    candidates: list[dict[str, Any]],
    evidence: list[dict[str, Any]],
    cil_rows: list[dict[str, Any]],
    corpus: _Corpus,
) -> list[dict[str, Any]]:
    c = b.config
    n_queries = Counter(q["question_id"] for q in queries)
    fallback = {q["question_id"] for q in queries if q["query_type"] == FALLBACK_QUERY}
    n_candidates = Counter(r["question_id"] for r in candidates)
    n_evidence = Counter(r["question_id"] for r in evidence)
    cils: dict[str, list[float | None]] = defaultdict(list)
    for row in cil_rows:
        cils[row["question_id"]].append(row["cil"])
    out = []
    for qid, q in qrows.items():
        split, above, reason = split_question(cils.get(qid, []), c.tau, c.k)
        requests, input_tokens, output_tokens = b.costs.of(qid)
        out.append(
            {
                **q,
                "split": split,
                "reason": reason,
                "n_queries": n_queries[qid],
                "queries_fallback": qid in fallback,
                "n_candidates": n_candidates[qid],
                "n_evidence": n_evidence[qid],
                "n_cil_ok": sum(1 for v in cils.get(qid, []) if v is not None),
                "n_above_tau": above,
                "n_corpus_on_or_after_D": corpus.n_on_or_after(q["resolution_date"]),
                "llm_requests": requests,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
        )
    return out


def _split_summary(question_rows: list[dict[str, Any]]) -> RunSummary:
    summary = RunSummary(name=f"{NAME}/split")
    summary.rows_read = summary.rows_written = len(question_rows)
    summary.metrics.update(Counter(q["split"] for q in question_rows))
    return summary.finish()


def eval_items(question_rows: list[dict[str, Any]], evidence: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``binary_prob`` item per question: cutoff D (00:00 UTC of the resolution date), the kept
    evidence as its allowed context, and its split."""
    context: dict[str, list[str]] = defaultdict(list)
    for e in sorted(evidence, key=lambda e: (e["question_id"], e["rank"])):
        context[e["question_id"]].append(e["article_id"])
    return [
        {
            "item_id": q["question_id"],
            "benchmark": NAME,
            "task": "binary",
            "split": q["split"],
            "type": "binary_prob",
            "question": q["question"],
            "background": [
                x
                for x in (
                    q["background"],
                    q["resolution_criteria"] and f"Resolution criteria: {q['resolution_criteria']}",
                )
                if x
            ],
            "choices": ["Yes", "No"],
            "gold_value": float(q["answer"]),
            "t_cut": cutoff_instant(q["resolution_date"]),
            "t_resolve": cutoff_instant(q["resolution_date"]),
            "context_article_ids": context[q["question_id"]],
            "category": q["source"],
            "source_id": q["question_id"],
        }
        for q in question_rows
    ]


def _counts(tables: dict[str, pa.Table], skipped: dict[str, int], corpus: _Corpus) -> dict[str, Any]:
    questions = tables["questions"].to_pylist()
    cil = tables["cil"].to_pylist()
    dropped = tables["dropped"].to_pylist()
    return {
        "questions": len(questions),
        "questions_by_split": dict(sorted(Counter(q["split"] for q in questions).items())),
        "importer_skipped": skipped,
        "corpus_articles_searchable": len(corpus.articles),
        "queries": tables["queries"].num_rows,
        "evidence_rows": tables["evidence"].num_rows,
        "cil_rows": len(cil),
        "cil_failed": sum(1 for r in cil if r["status"] != "ok"),
        "cil_truncated_windows": sum(1 for r in cil if r["truncated"]),
        "dropped_by_stage_and_reason": dict(
            sorted(Counter(f"{d['stage']}: {d['reason']}" for d in dropped).items())
        ),
        "llm_requests": sum(q["llm_requests"] for q in questions),
    }


# ---------------------------------------------------------------------------------- --plan
def plan_rows(
    b: _Builder,
    qrows: dict[str, dict[str, Any]],
    plans: dict[str, QuestionPlan],
    unknown_queries: set[str],
    unknown_evidence: set[str],
) -> list[dict[str, Any]]:
    """LLM requests per question: first attempts per stage group, exact for queries; exact for
    ratings once the queries are known; exact for the CIL terms once the evidence is known,
    otherwise the worst case for N = top_n (``bound``). ``retries`` are the retries of failed
    answers the cache already holds (a run after a complete one makes exactly these requests;
    failures not answered yet may add more). ``formula_*`` are the §6 counts from the question's
    bins: the planned conditionals equal C; the planned joints equal J_shared unless the K_max
    cap gives two bins the same window, whose table is then requested once."""
    c = b.config
    worst_c, worst_j = c.r * c.top_n * 2 ** (c.k_max + 1), c.r * c.top_n * 2**c.k_max
    rows = []
    for qid in qrows:
        row: dict[str, Any] = {
            "question_id": qid,
            "queries": b.costs.requests(qid, "queries"),
            "retries": b.costs.requests(qid, "retries"),
        }
        row["relevance"] = None if qid in unknown_queries else b.costs.requests(qid, "relevance")
        exact = qid not in unknown_evidence and not c.evidence_only
        row["exact"] = exact and row["relevance"] is not None
        if exact:
            row["joint"] = b.costs.requests(qid, "joint")
            row["conditional"] = b.costs.requests(qid, "conditional")
            counts = Counter(g for g, group in plans[qid].bins.items() for _ in group) if qid in plans else {}
            f = cost_formulas(counts, c.w, c.k_max, c.r)
            row.update(formula_conditional=f.conditionals, formula_joint_shared=f.joint_shared)
        else:
            row.update(joint=None, conditional=None, bound=worst_c + worst_j)
        rows.append(row)
    return rows


def format_plan(rows: list[dict[str, Any]]) -> str:
    """The plan as a fixed-width table; ``?`` = not known before the queries run, ``≤`` = bound."""
    header = (
        f"{'question':<44}{'queries':>8}{'rating':>8}{'joint':>9}{'cond.':>10}{'retries':>8}{'total':>11}"
        f"{'§6 C/J':>16}"
    )
    lines = ["LLM requests per question (first attempts, then known retries)", header, "-" * len(header)]
    for r in rows:
        rating = "?" if r["relevance"] is None else str(r["relevance"])
        known = r["queries"] + (r["relevance"] or 0) + r["retries"]
        if r.get("joint") is not None:
            total = str(known + r["joint"] + r["conditional"])
            joint, cond = str(r["joint"]), str(r["conditional"])
            formula = f"{r['formula_conditional']}/{r['formula_joint_shared']}"
        else:
            joint, cond, formula = "?", "?", ""
            total = f"≤{known + r['bound']}" if r["relevance"] is not None else "?"
        lines.append(
            f"{r['question_id'][:43]:<44}{r['queries']:>8}{rating:>8}{joint:>9}{cond:>10}{r['retries']:>8}"
            f"{total:>11}{formula:>16}"
        )
    return "\n".join(lines)
