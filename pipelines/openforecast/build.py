"""The OpenForecast build: collection, timelines, questions, splits and outputs.

Outputs under ``<root>/benchmarks/openforecast/``: ``ce``, ``ce_doc``, ``timeline_rounds`` (one
provenance row per CE and round), ``atomic_event``, one table per task partitioned by split
(``stf``, ``ltf``, ``aqa``, ``mcnc``, ``mcac``, ``vqa``), ``eval_items``, ``rejected`` (every
dropped row with its stage and reason, in the kit's one schema) and the dataset card. LLM
stages keep their request caches and outputs under ``<root>/openforecast/<stage>/``. With
``plan`` nothing is computed or written: the requests of every stage are printed (the
complement rounds after the first depend on answers, so they show only cached work).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any

import pyarrow as pa

from pipelines.builders import Build, Builder, Demo, Inputs, Outputs, Result, ScaleInputs
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StagePlan
from pipelines.openforecast import annotate
from pipelines.openforecast.collect import collect
from pipelines.openforecast.config import NAME, Config
from pipelines.openforecast.state import State
from pipelines.openforecast.tasks import questions
from pipelines.quality import Quality
from udfs.audit import EventKey
from udfs.openforecast.dates import period
from udfs.openforecast.items import LTF_QUESTION, eval_item
from udfs.openforecast.questions import TASKS, CETimeline
from udfs.openforecast.temporal import SPLITS
from udfs.schemas import ARTICLES, WCEP_EVENTS, WIKI_PAGES

log = logging.getLogger("augury.openforecast")

_STR_LIST = pa.list_(pa.string())
CE_SCHEMA = pa.schema(
    [
        pa.field("ce_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # wikipedia | wcep
        pa.field("key", pa.string()),  # page title, or WCEP story key "A|B"
        pa.field("title", pa.string()),
        pa.field("category", pa.string()),  # one of the ten WCEP headings
        pa.field("ce_date_raw", pa.string()),  # yyyy[-MM[-dd]]
        pa.field("ce_date", pa.date32()),  # last day of ce_date_raw's period (decides the split)
        pa.field("split", pa.string()),
        pa.field("n_docs", pa.int32()),
        pa.field("n_fallback_docs", pa.int32()),
        pa.field("n_events", pa.int32()),  # atomic events of the final timeline (null: dropped)
        pa.field("kept", pa.bool_()),  # has a final timeline (else see `rejected`)
    ]
)
CE_DOC_SCHEMA = pa.schema(
    [
        pa.field("ce_id", pa.string(), nullable=False),
        pa.field("seq", pa.int32()),
        pa.field("date", pa.date32()),  # WCEP portal day (null for a Wikipedia page)
        pa.field("title", pa.string()),
        pa.field("text", pa.string()),
        pa.field("url", pa.string()),
        pa.field("article_id", pa.string()),
        pa.field("event_id", pa.string()),
        pa.field("is_fallback", pa.bool_()),  # the WCEP event text stands in for a missing article
        pa.field("split", pa.string()),
    ]
)
ROUNDS_SCHEMA = pa.schema(
    [
        pa.field("ce_id", pa.string(), nullable=False),
        pa.field("round", pa.int32()),  # 0 = extraction, 1.. = complement rounds, -1 = adjustment
        pa.field("action", pa.string()),
        pa.field("stage", pa.string()),
        pa.field("doc_seq", pa.int32()),
        pa.field("doc_date", pa.date32()),
        pa.field("prompt_id", pa.string()),
        pa.field("prompt_version", pa.int32()),
        pa.field("model", pa.string()),
        pa.field("sample_index", pa.int32()),
        pa.field("retention", pa.float64()),  # share of previous items kept verbatim
        pa.field("timeline_before", _STR_LIST),
        pa.field("answer", _STR_LIST),
        pa.field("timeline_after", _STR_LIST),
        pa.field("raw_text", pa.string()),
        pa.field("error", pa.string()),
    ]
)
ATOMIC_SCHEMA = pa.schema(
    [
        pa.field("ce_id", pa.string(), nullable=False),
        pa.field("idx", pa.int32(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("ts_raw", pa.string()),  # the timestamp answer as written
        pa.field("ts", pa.string()),  # yyyy[-MM[-dd]] or null
        pa.field("structured_json", pa.string()),  # JSON list of structured events (null: failed)
        pa.field("split", pa.string()),
    ]
)
TASK_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),
        pa.field("task", pa.string(), nullable=False),
        pa.field("ce_id", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("cut_idx", pa.int32()),
        pa.field("t_cut", pa.date32()),  # the cut day (00:00 UTC is the information cutoff)
        pa.field("background", _STR_LIST),
        pa.field("question", pa.string()),
        pa.field("choices", _STR_LIST),
        pa.field("gold_index", pa.int32()),
        pa.field("gold_texts", _STR_LIST),
        pa.field("target_idx", pa.list_(pa.int32())),
        pa.field("target_day", pa.string()),  # STF
        pa.field("argument", pa.string()),  # AQA / MCAC
    ]
)


def finish(b: Build[Config], s: State) -> Outputs:
    """The tables, the evaluation items of every question and the card's counts."""
    tables = _tables(s, b.ledger)
    titles = {ce["ce_id"]: ce["title"] for ce in s.ces}
    items = [
        eval_item(x, _resolve(x, s.final), titles[x["ce_id"]]) for task in TASKS for x in s.samples[task]
    ]
    return Outputs(
        tables, items, lambda written, _n: _counts(written, b.ledger, b.config.cutoffs, s.complement_rounds)
    )


def _resolve(sample: dict[str, Any], timelines: dict[str, CETimeline]) -> Any:
    """The end of the latest dated target (when the answer is known), or None."""
    ends = [p.end for i in sample["target_idx"] if (p := period(timelines[sample["ce_id"]].events[i].ts))]
    return max(ends) if ends else None


def _tables(s: State, ledger: Ledger) -> dict[str, pa.Table]:
    ces, described = s.ces, s.described
    split_of = {ce["ce_id"]: ce["split"] for ce in ces}
    ce_rows, doc_rows = [], []
    for ce in ces:
        events = s.timelines.get(ce["ce_id"])
        ce_rows.append(
            {
                **{
                    k: ce[k]
                    for k in (
                        "ce_id",
                        "source",
                        "key",
                        "title",
                        "category",
                        "ce_date_raw",
                        "ce_date",
                        "split",
                    )
                },
                "n_docs": len(ce["docs"]),
                "n_fallback_docs": sum(d["is_fallback"] for d in ce["docs"]),
                "n_events": len(events) if events is not None else None,
                "kept": events is not None,
            }
        )
        doc_rows += [{**d, "ce_id": ce["ce_id"], "split": ce["split"]} for d in ce["docs"]]
    atomic = [
        {"ce_id": ce_id, "idx": i, "text": text, "split": split_of[ce_id], **described[(ce_id, i)]}
        for ce_id, events in s.timelines.items()
        for i, text in enumerate(events)
    ]
    tables = {
        "ce": _table(ce_rows, CE_SCHEMA),
        "ce_doc": _table(doc_rows, CE_DOC_SCHEMA),
        "timeline_rounds": _table(s.rounds, ROUNDS_SCHEMA),
        "atomic_event": _table(atomic, ATOMIC_SCHEMA),
        "rejected": ledger.rejected_table(),
    }
    for task in TASKS:
        tables[task] = _table(s.samples[task], TASK_SCHEMA)
    return tables


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def _counts(tables: dict[str, pa.Table], ledger: Ledger, cutoffs: Any, rounds: int) -> dict[str, Any]:
    ces = [r for r in tables["ce"].to_pylist() if r["kept"]]
    questions: dict[str, dict[str, int]] = {}
    by_category: dict[str, dict[str, int]] = {}
    for task in TASKS:
        rows = tables[task].to_pylist()
        questions[task] = {s: sum(r["split"] == s for r in rows) for s in SPLITS}
        by_category[task] = dict(Counter(r["category"] or "none" for r in rows).most_common())
    actions = Counter(r["action"] for r in tables["timeline_rounds"].to_pylist())
    return {
        "split_cutoffs": {
            "train_end": str(cutoffs.train_end),
            "dev_end": str(cutoffs.dev_end),
            "test_end": str(cutoffs.test_end),
        },
        "complex_events": {
            "total": len(ces),
            "by_source": dict(Counter(r["source"] for r in ces)),
            "by_split": {s: sum(r["split"] == s for r in ces) for s in SPLITS},
            "by_category": dict(Counter(r["category"] or "none" for r in ces).most_common()),
        },
        "atomic_events": {
            "total": tables["atomic_event"].num_rows,
            "by_split": dict(Counter(tables["atomic_event"].column("split").to_pylist())),
        },
        "questions": questions,
        "questions_by_category": by_category,
        "timeline_rounds": {"complement_rounds": rounds, **dict(actions)},
        "rejected": ledger.rejected_counts(),
    }


def plan_text(b: Build[Config], s: State) -> str:
    return (
        StagePlan.table(b.runner.plans)
        + "\n(later stages see only the rows whose earlier answers are cached)"
    )


def scale(inputs: ScaleInputs) -> dict[str, Any]:
    """``bench.scale``: the 3 WCEP stories (5 events each, at most 3 documents) and 1 Wikipedia
    page, one timeline sample, 120 words a document."""
    return {
        "wcep_stories": inputs.stories,
        "wcep_min_events": 5,
        "max_docs": 3,
        "max_doc_words": 120,
        "timeline_samples": 1,
        "min_timeline_events": 3,
        "test_start": inputs.test_start,
        "limit": 4,
    }


BUILDER = Builder(
    name=NAME,
    config=Config,
    inputs=Inputs((WIKI_PAGES, WCEP_EVENTS), any_of=True, optional=(ARTICLES,)),
    state=State,
    steps=(
        collect,
        annotate.extract,
        annotate.complement,
        annotate.adjust,
        annotate.drop_short,
        annotate.describe_events,
        questions,
    ),
    finish=finish,
    tables=dict.fromkeys(("ce", "ce_doc", "timeline_rounds", "atomic_event", "rejected"), ())
    | dict.fromkeys(TASKS, ("split",)),
    event=EventKey("complex event", ("mcnc", "mcac", "vqa", "stf", "ltf", "aqa"), "sample_id", "ce_id"),
    demo=Demo("OpenForecast (complex events from Wikipedia and the Current Events Portal)", ("--demo",)),
    scale=scale,
    plan=plan_text,
    quality=Quality(
        # the builder's own question texts; only the candidate event of a VQA question is the model's
        fixed=(
            re.escape(LTF_QUESTION),
            r"What will happen on [^?]+\?",
            re.escape("Which of these events will happen?"),
            r"Will this event happen\? (?P<generated>.+)",
        ),
        prompts=("openforecast.mcac_question",),
        paper={
            "categories (WCEP headings)": "Politics and elections 20.9%, Disasters and accidents 19.1%, Armed "
            "conflicts and attacks 18.6%, Law and crime 17.5%, International relations 8.9%, Business and "
            "economy 4.2%, Health and environment 4.1%, Arts and culture 3.0%, Science and technology 2.6%, "
            "Sports 1.2%",
            "VQA positive/negative": "0.97",
        },
    ),
)


def run(config: Config) -> Result:
    """Build the benchmark; returns its tables, card and step summaries (with ``plan``: the
    summaries only, after printing the requests per stage)."""
    return BUILDER.run(config)
