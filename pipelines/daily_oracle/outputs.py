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
import logging
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.benchmarks import write_benchmark_table, write_card, write_eval_items
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.days import day_markers
from pipelines.llm.ledger import REJECTED_SCHEMA, Ledger
from pipelines.llm.stage import StageRunner
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


def tables(
    articles: list[Article], tf: list[dict[str, Any]], mc: list[dict[str, Any]], ledger: Ledger
) -> dict[str, pa.Table]:
    """This run's four tables: the selection, the kept TF and MC rows and every rejection."""
    return {
        "selection": pa.Table.from_pylist([selection_row(a) for a in articles], schema=SELECTION_SCHEMA),
        "tf_questions": pa.Table.from_pylist(tf, schema=TF_SCHEMA),
        "mc_questions": pa.Table.from_pylist(mc, schema=MC_SCHEMA),
        "rejected": ledger.rejected_table(),
    }


def write_days(root: str, days: list[dt.date], tables: dict[str, pa.Table]) -> None:
    """Replace exactly the given days' partitions of every table; other days stay untouched."""
    layout = Layout(root)
    for name, table in tables.items():
        for day in days:
            storage.delete(layout.benchmark(NAME, name, f"date={day.isoformat()}"))
        if table.num_rows:
            write_benchmark_table(root, NAME, name, table, partition_cols=("date",), replace="partitions")


def outputs_current(root: str) -> bool:
    """Whether eval_items and the dataset card exist and the card covers exactly the marked days
    (a run stopped between marking its days and writing these leaves them behind)."""
    layout = Layout(root)
    card_uri = layout.benchmark(NAME, "dataset_card.json")
    if not (storage.exists(card_uri) and storage.exists(layout.benchmark(NAME, "eval_items"))):
        return False
    return set(storage.read_json(card_uri)["counts"]["per_day"]) == set(day_markers(root))


def write_outputs(
    config: Config,
    runner: StageRunner,
    built: list[dt.date],
    skipped: list[dt.date],
    unmarked: dict[dt.date, str],
) -> dict[str, Any]:
    """Evaluation items and the dataset card over every day on disk (per-day counts: marked days)."""
    tf, mc = read_table(config.root, "tf_questions"), read_table(config.root, "mc_questions")
    write_eval_items(config.root, NAME, eval_items(tf.to_pylist(), mc.to_pylist()))
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
    counts = {
        "days": len(per_day),
        "days_built_this_run": [d.isoformat() for d in built],
        "days_skipped_this_run": [d.isoformat() for d in skipped],
        "days_not_marked_this_run": {d.isoformat(): reason for d, reason in sorted(unmarked.items())},
        "tf_questions": tf.num_rows,
        "mc_questions": mc.num_rows,
        "per_day": dict(sorted(per_day.items())),
        "per_category": per_category,
        "mc_stems": dict(Counter(mc["mc_stem"].to_pylist())),
        "rejected_by_reason": dict(reasons.most_common()),
    }
    return write_card(config.root, NAME, runner, counts, config)
