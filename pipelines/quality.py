"""The quality gate of the builder driver: no degenerate or repeated question reaches a benchmark.

Every item a run makes is checked (``udfs.quality.item_problems``) after the builder's
``finish`` and before anything is written. An item with a finding becomes a rejected row of the
``quality`` step with reason ``quality_<first finding>`` (all findings in its detail); of items
of one task with the same background and answer that say nearly the same thing, the earliest (by
cutoff) is kept and the rest are rejected as ``quality_near_duplicate``. The rejected items leave ``eval_items`` and the builder's question
tables (``Builder.event``: the tables whose id column holds an item's ``source_id``) alike.
Items of earlier runs (Daily Oracle's days built before) were checked when they were made: they
are kept, and a new item repeating one of them is the one rejected.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from udfs.card_quality import NEAR_DUPLICATE
from udfs.prompts import load_prompt
from udfs.quality import dedup_text, item_problems, near_duplicates, words
from udfs.report import RunSummary

if TYPE_CHECKING:
    from pipelines.builders import Build, Builder, Outputs


@dataclass(frozen=True)
class Quality:
    """A builder's part of the gate. ``fixed``: regular expressions of the questions the builder
    writes from a template of its own (a ``generated`` group marks model text inside one; the
    rest is not checked); ``prompts``: ids of the prompts that write its questions (a question
    copying their examples is rejected); ``paper``: the paper's own quality figures, shown
    beside the benchmark's in the dataset card."""

    fixed: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    paper: Mapping[str, str] = field(default_factory=dict)


def _examples(prompt_ids: tuple[str, ...]) -> list[str]:
    prompts = [load_prompt(p) for p in prompt_ids]
    return [f"{p.system_template or ''}\n{p.user_template}" for p in prompts]


def run_ids(builder: Builder[Any, Any], tables: Mapping[str, pa.Table]) -> set[str] | None:
    """The ``source_id`` of every item made by this run (None: every item is this run's)."""
    event = builder.event
    if event is None:
        return None
    present = [tables[t] for t in event.tables if t in tables]
    return {i for t in present for i in t.column(event.id_column).to_pylist()}


def gate(builder: Builder[Any, Any], b: Build[Any], out: Outputs) -> Outputs:
    """Check this run's items; return the outputs without the rejected ones (module docstring)."""
    if out.items is None:
        return out
    options = b.config.quality
    spec = builder.quality
    fixed = [re.compile(p) for p in spec.fixed]
    examples = _examples(spec.prompts)
    sources = out.sources or {}
    new = run_ids(builder, out.tables)
    is_new = [new is None or item.get("source_id") in new for item in out.items]
    step = b.ledger.step("quality")
    problems: dict[int, list[str]] = {}
    for i, item in enumerate(out.items):
        if is_new[i]:
            found = item_problems(
                item, fixed=fixed, examples=examples, source=sources.get(item["item_id"]), options=options
            )
            if found:
                problems[i] = [f"quality_{p}" for p in found]
    # among items of one task with the same background and answer (two tasks of one event may
    # share their options; the same options after another timeline, or with another answer, ask
    # something else): earlier runs' items first, then this run's by cutoff; a flagged item is
    # no one's original
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in sorted(range(len(out.items)), key=lambda i: (is_new[i], out.items[i]["t_cut"], i)):
        if i not in problems:
            item = out.items[i]
            key = (item["task"], answer_key(item), *(item.get("background") or ()))
            groups.setdefault(key, []).append(i)
    for order in groups.values():
        texts = [
            dedup_text(*(out.items[i].get(k) for k in ("question", "choices", "gold_texts"))) for i in order
        ]
        for i, first in zip(order, near_duplicates(texts, options.near_duplicate), strict=True):
            if first is not None and is_new[i]:
                problems[i] = [NEAR_DUPLICATE, f"repeats {out.items[order[first]]['item_id']}"]
    kept = []
    for i, item in enumerate(out.items):
        if i in problems:
            _reject(b, step, item, problems[i])
        else:
            kept.append(item)
            if is_new[i]:
                b.ledger.keep(step)
    b.ledger.close(step)
    rejected = [out.items[i].get("source_id") for i in problems]
    return dataclasses.replace(out, items=kept, tables=_without(builder, out.tables, rejected))


def answer_key(item: dict[str, Any]) -> str:
    """An item's gold answer as one string: its gold option, texts, order or value."""
    choices, gold = item.get("choices"), item.get("gold_index")
    if choices and gold is not None:
        return " ".join(words(choices[gold]))
    return repr([item.get(k) for k in ("gold_texts", "gold_order", "gold_value")])


def _reject(b: Build[Any], step: RunSummary, item: dict[str, Any], found: list[str]) -> None:
    day = item.get("t_resolve") or item["t_cut"]
    b.ledger.drop(
        step,
        found[0],
        unit="item",
        item_id=item["item_id"],
        parent_id=item.get("source_id"),
        detail=", ".join(found),
        raw_text=item.get("question"),
        record={k: item.get(k) for k in ("task", "type", "question", "choices", "gold_index", "gold_texts")},
        date=day.date(),
    )


def _without(builder: Builder[Any, Any], tables: dict[str, pa.Table], ids: list[Any]) -> dict[str, pa.Table]:
    """The tables without the rows of the rejected items (by the event's id column)."""
    if not ids or builder.event is None:
        return tables
    column, value_set = builder.event.id_column, pa.array(ids, pa.string())
    return {
        name: t.filter(pc.invert(pc.is_in(t.column(column), value_set=value_set)))
        if name in builder.event.tables
        else t
        for name, t in tables.items()
    }
