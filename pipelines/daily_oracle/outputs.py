"""The outputs under ``benchmarks/daily_oracle/``: the kept questions (after the invariant
checks), the accounting of every article and question, the per-day tables, the evaluation items
and the dataset card.

``selection``, ``tf_questions``, ``mc_questions`` and ``rejected`` are partitioned by ``date``
(the resolution date); a run replaces exactly its pending days' partitions. ``rejected`` has the
one schema of every builder (``pipelines.llm.ledger.REJECTED_SCHEMA``): ``unit`` is ``article``
or ``question``, ``item_id`` the article or question id, ``parent_id`` a question's article,
``record`` the rest (url, title, selection, keypoint, question index, question, answer,
distractors, filter points) as JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.builders import Build, Outputs
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.days import clear_marks, count_days, day_markers, mark_days, unmarked_days
from pipelines.daily_oracle.state import State
from pipelines.llm.ledger import REJECTED_SCHEMA, Ledger
from udfs import storage
from udfs.daily_oracle.parsing import CATEGORIES
from udfs.daily_oracle.questions import output_problems
from udfs.daily_oracle.rows import eval_items, question_row, selection_row
from udfs.daily_oracle.tables import MC_SCHEMA, SELECTION_SCHEMA, TF_SCHEMA
from udfs.daily_oracle.units import Article, Question, Rejection
from udfs.layout import Layout
from udfs.report import RunSummary

log = logging.getLogger("augury.daily_oracle")

TABLES = {
    "selection": SELECTION_SCHEMA,
    "tf_questions": TF_SCHEMA,
    "mc_questions": MC_SCHEMA,
    "rejected": REJECTED_SCHEMA,
}


def read_table(root: str, name: str) -> pa.Table:
    """One output table over every built day."""
    return storage.read_table(Layout(root).benchmark(NAME, name), TABLES[name], partition_cols=("date",))


def kept_rows(
    questions: list[Question], config: Config, versions: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The TF and MC rows of the live questions. A row that breaks the benchmark's invariants
    (``questions.output_problems``) rejects its question (``invariant_violation``) instead."""
    tf, mc = [], []
    for q in questions:
        if not q.alive:
            continue
        row = question_row(q, config.llm.model, config.seed, versions)
        problems = output_problems(row, q.is_mc)
        if problems:
            log.warning("question %s breaks the output invariants: %s", q.id, problems)
            q.rejection = Rejection("output", "invariant_violation", "; ".join(problems), q.filter_raw)
        else:
            (mc if q.is_mc else tf).append(row)
    return tf, mc


def account(
    ledger: Ledger, articles: list[Article], questions: list[Question]
) -> tuple[RunSummary, RunSummary]:
    """The ``articles`` step (picked = with questions + rejected) and the ``questions`` step
    (4 × articles with questions = kept + rejected); every rejection becomes a ledger row."""
    arts = ledger.step("articles")
    for a in articles:
        _settle(ledger, arts, a, None)
    qs = ledger.step("questions")
    with_questions = arts.rows_written
    if len(questions) != 4 * with_questions:
        raise AssertionError(f"{len(questions)} questions from {with_questions} articles with questions")
    for q in questions:
        _settle(ledger, qs, q.article, q)
    fallbacks = Counter(q.category_fallback for q in questions if q.alive and q.category_fallback)
    qs.metrics.update({f"category_other_{reason}": n for reason, n in sorted(fallbacks.items())})
    return ledger.close(arts), ledger.close(qs)


def _settle(ledger: Ledger, step: RunSummary, a: Article, q: Question | None) -> None:
    """Count a unit as kept, or record its rejection."""
    unit = q or a
    r = unit.rejection
    if r is None:
        ledger.keep(step)
        return
    ledger.drop(
        step,
        r.reason,
        unit="question" if q else "article",
        item_id=unit.id,
        parent_id=a.id if q else None,
        detail=r.detail,
        raw_text=r.raw_text,
        record=unit.record(),
        date=a.day,
        stage=r.stage,
    )


def finish(b: Build[Config], s: State) -> Outputs:
    """This run's outputs: its days' ``selection``, ``tf_questions`` and ``mc_questions`` (the
    kept questions, after the invariant checks), every article and question accounted for, the
    ``days`` step; the evaluation items of every built day; the card after the days are marked.
    With nothing pending, the items and the card are rewritten only when they lag behind the
    day markers (a run stopped between marking its days and writing them)."""
    root = b.config.root
    if not s.pending:
        if not s.skipped or outputs_current(root):
            return Outputs({}, partitions=[])
        log.info("eval_items or the dataset card is missing or behind the day markers: rewriting them")
        return Outputs({}, all_items(root, [], [], []), lambda _t, _n: card_counts(b.config, s), [])
    versions = json.dumps(dict(sorted(b.runner.prompts_used.items())), sort_keys=True)
    tf, mc = kept_rows(s.questions, b.config, versions)
    account(b.ledger, s.articles, s.questions)
    s.unmarked = unmarked_days(s.pending, s.articles, s.questions, s.prefiltered)
    count_days(b.ledger, s.pending, s.unmarked)
    s.built = [d for d in s.pending if d not in s.unmarked]
    clear_marks(root, s.pending)  # a forced day is done again only once rewritten
    tables = {
        "selection": pa.Table.from_pylist([selection_row(a) for a in s.articles], schema=SELECTION_SCHEMA),
        "tf_questions": pa.Table.from_pylist(tf, schema=TF_SCHEMA),
        "mc_questions": pa.Table.from_pylist(mc, schema=MC_SCHEMA),
    }
    return Outputs(
        tables,
        items=all_items(root, s.pending, tf, mc),
        counts=lambda _tables, _rejected: card_counts(b.config, s),
        partitions=[d.isoformat() for d in s.pending],
        commit=lambda: mark_days(root, s.pending, s.unmarked, s.articles, s.questions, s.prefiltered),
        sources={r["question_id"]: "\n".join(filter(None, (r[k] for k in SOURCE))) for r in (*tf, *mc)},
    )


SOURCE = ("title", "keypoint", "summary", "text")  # what a question is written from


def all_items(
    root: str, pending: list[dt.date], tf: list[dict[str, Any]], mc: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The evaluation items of every built day: the days on disk other than ``pending``, then
    this run's rows, in day order."""
    others = ~pc.field("date").isin(pa.array(pending, pa.date32()))
    rows = {}
    for name, new in (("tf_questions", tf), ("mc_questions", mc)):
        table = storage.read_table(Layout(root).benchmark(NAME, name), TABLES[name], ("date",), filter=others)
        rows[name] = sorted([*table.to_pylist(), *new], key=lambda r: r["date"])
    return eval_items(rows["tf_questions"], rows["mc_questions"])


def outputs_current(root: str) -> bool:
    """Whether eval_items and the dataset card exist and the card covers exactly the marked days
    (a run stopped between marking its days and writing these leaves them behind)."""
    layout = Layout(root)
    card_uri = layout.benchmark(NAME, "dataset_card.json")
    if not (storage.exists(card_uri) and storage.exists(layout.benchmark(NAME, "eval_items"))):
        return False
    return set(storage.read_json(card_uri)["counts"]["per_day"]) == set(day_markers(root))


def card_counts(config: Config, s: State) -> dict[str, Any]:
    """The card's counts over every day on disk (per-day counts: the marked days)."""
    tf, mc = read_table(config.root, "tf_questions"), read_table(config.root, "mc_questions")
    per_day = day_markers(config.root)
    per_category = {
        c: {
            "tf": int(pc.sum(pc.equal(tf["category"], c)).as_py() or 0),
            "mc": int(pc.sum(pc.equal(mc["category"], c)).as_py() or 0),
        }
        for c in CATEGORIES
    }
    reasons: Counter = Counter()
    for counts in per_day.values():
        reasons.update(counts["rejected_by_reason"])
    return {
        "days": len(per_day),
        "days_built_this_run": [d.isoformat() for d in s.built],
        "days_skipped_this_run": [d.isoformat() for d in s.skipped],
        "days_not_marked_this_run": {d.isoformat(): reason for d, reason in sorted(s.unmarked.items())},
        "tf_questions": tf.num_rows,
        "mc_questions": mc.num_rows,
        "per_day": dict(sorted(per_day.items())),
        "per_category": per_category,
        "mc_stems": dict(Counter(mc["mc_stem"].to_pylist())),
        "rejected_by_reason": dict(reasons.most_common()),
    }
