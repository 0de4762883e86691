"""The questions of a run, and their output rows: split, counts and LLM cost; their eval items.

Questions come from a ForecastBench question set and its resolution set (resolved binary
questions only) or from a JSONL/Parquet file (``udfs.questions``); ``--question-ids`` keeps a
subset and ``--limit N`` the first N of them, both in the importer's order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.builders import Build
from pipelines.prophet.config import NAME, Config
from pipelines.prophet.costs import Costs
from pipelines.prophet.evidence import FALLBACK_QUERY, Corpus
from pipelines.prophet.state import State
from udfs import storage
from udfs.cli import InputError
from udfs.prophet.cil import cutoff_instant, split_question
from udfs.questions import forecastbench_questions, load_questions_file


def read_questions(b: Build[Config], s: State) -> None:
    """The questions of the run (``load_questions``), by id, with their resolution dates."""
    s.questions, s.skipped = load_questions(b.config)
    s.qrows = {q["question_id"]: q for q in s.questions.to_pylist()}
    s.dates = {qid: q["resolution_date"] for qid, q in s.qrows.items()}


def load_questions(config: Config) -> tuple[pa.Table, dict[str, int]]:
    """The questions of the run and the importer's skip counts; a missing file or an unknown
    question id is an ``InputError``."""
    files = config.forecastbench or (config.questions,)
    missing = [f for f in files if not storage.exists(f)]
    if missing:
        raise InputError(f"no question file {', '.join(missing)}")
    if config.forecastbench:
        table, skipped = forecastbench_questions(*config.forecastbench)
    else:
        table, skipped = load_questions_file(config.questions), {}  # type: ignore[arg-type]
    if config.question_ids:
        unknown = set(config.question_ids) - set(table.column("question_id").to_pylist())
        if unknown:
            raise InputError(f"unknown question ids: {sorted(unknown)}")
        table = table.filter(pc.is_in(table.column("question_id"), pa.array(list(config.question_ids))))
    if config.limit is not None:
        table = table.slice(0, config.limit)
    return table, skipped


def question_rows(
    config: Config,
    costs: Costs,
    questions: dict[str, dict[str, Any]],
    queries: list[dict[str, Any]],
    candidates: list[dict[str, Any]],
    evidence: list[dict[str, Any]],
    cil_rows: list[dict[str, Any]],
    corpus: Corpus,
) -> list[dict[str, Any]]:
    """One output row per question: its fields, its L1/L2 split and why, and its counts and cost."""
    n_queries = Counter(q["question_id"] for q in queries)
    fallback = {q["question_id"] for q in queries if q["query_type"] == FALLBACK_QUERY}
    n_candidates = Counter(r["question_id"] for r in candidates)
    n_evidence = Counter(r["question_id"] for r in evidence)
    cils: dict[str, list[float | None]] = defaultdict(list)
    for row in cil_rows:
        cils[row["question_id"]].append(row["cil"])
    out = []
    for qid, q in questions.items():
        split, above, reason = split_question(cils.get(qid, []), config.tau, config.k)
        requests, input_tokens, output_tokens = costs.of(qid)
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


def eval_items(
    question_rows: list[dict[str, Any]], evidence: list[dict[str, Any]], cil_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One ``binary_prob`` item per question: cutoff D (00:00 UTC of the resolution date), the kept
    evidence as its allowed context with each article's CIL as its score (null when its CIL
    failed; §5's CIL-high / CIL-low settings), and its split."""
    cil = {(r["question_id"], r["article_id"]): r["cil"] for r in cil_rows if r["status"] == "ok"}
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
            "context_scores": [cil.get((q["question_id"], a)) for a in context[q["question_id"]]],
            "category": q["source"],
            "source_id": q["question_id"],
        }
        for q in question_rows
    ]
