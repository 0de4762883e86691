"""The items to evaluate: every benchmark's ``benchmarks/<name>/eval_items`` under the root
(discovered, so a new builder needs no code change here), ForecastBench question/resolution
pairs, plain question files and ForecastQA JSON files.

Items that break the item contract are rejected with a reason, never silently dropped.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa

from udfs import storage
from udfs.eval_items import EVAL_ITEM_SCHEMA, InvalidItemError, validate_item
from udfs.evaluate import importers
from udfs.ids import stable_seed
from udfs.layout import Layout
from udfs.questions import forecastbench_questions, load_questions_file
from udfs.report import RunSummary


def discover_benchmarks(root: str) -> list[str]:
    """Names of the benchmarks that wrote evaluation items under ``<root>/benchmarks/``."""
    base = Layout(root).path("benchmarks")
    names = set()
    for uri in storage.list_files(base, ".parquet"):
        parts = PurePosixPath(uri[len(base) + 1 :]).parts
        if len(parts) >= 3 and parts[1] == "eval_items":
            names.add(parts[0])
    return sorted(names)


def read_benchmark_items(root: str, name: str) -> pa.Table:
    """One benchmark's items (any hive partitioning, cast to the item schema)."""
    return storage.read_table(Layout(root).benchmark(name, "eval_items"), EVAL_ITEM_SCHEMA)


def load_items(
    root: str,
    benchmarks: tuple[str, ...] | None,
    forecastbench: tuple[tuple[str, str], ...],
    question_files: tuple[str, ...],
    forecastqa: tuple[str, ...],
    forecastqa_split: str | None,
) -> tuple[list[dict[str, Any]], RunSummary]:
    """All items, validated; the summary counts what was read, kept and rejected (by reason)."""
    summary = RunSummary(name="evaluate/items")
    tables: list[pa.Table] = []
    found = discover_benchmarks(root)
    unknown = set(benchmarks or ()) - set(found)
    if unknown:
        raise ValueError(f"no eval_items under {root}/benchmarks for {sorted(unknown)} (found {found})")
    for name in found:
        if benchmarks is None or name in benchmarks:
            tables.append(read_benchmark_items(root, name))
    for questions, resolutions in forecastbench:
        table, skipped = forecastbench_questions(questions, resolutions)
        items, no_freeze = importers.question_items(table, "forecastbench")
        tables.append(items)
        summary.notes.append(f"forecastbench {PurePosixPath(questions).name}: skipped {skipped | no_freeze}")
    for path in question_files:
        items, no_freeze = importers.question_items(load_questions_file(path), PurePosixPath(path).stem)
        tables.append(items)
        summary.notes.append(f"{PurePosixPath(path).name}: skipped {no_freeze}")
    for path in forecastqa:
        tables.append(importers.load_forecastqa(path, storage.read_bytes(path), forecastqa_split))
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for table in tables:
        for item in table.cast(EVAL_ITEM_SCHEMA).to_pylist():
            summary.rows_read += 1
            key = (item["benchmark"], item["item_id"])
            try:
                validate_item(item)
            except InvalidItemError as exc:
                summary.reject(f"invalid_item: {str(exc).split(': ', 1)[-1][:60]}")
                continue
            if key in seen:
                summary.reject("duplicate_item_id")
                continue
            seen.add(key)
            items.append(item)
            summary.rows_written += 1
    return items, summary


def select(
    items: list[dict[str, Any]], splits: tuple[str, ...] | None, limit: int | None, seed: int
) -> tuple[list[dict[str, Any]], RunSummary]:
    """Keep the requested splits and at most ``limit`` items per (benchmark, task), chosen by a
    seeded hash of the item id (the same sample on every run)."""
    summary = RunSummary(name="evaluate/selection")
    by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        summary.rows_read += 1
        if splits is not None and item["split"] not in splits:
            summary.reject("split_not_selected")
            continue
        by_task.setdefault((item["benchmark"], item["task"]), []).append(item)
    kept = []
    for group in by_task.values():
        group.sort(key=lambda i: stable_seed(seed, "sample", i["benchmark"], i["item_id"]))
        take = group if limit is None else group[:limit]
        if len(group) > len(take):
            summary.reject("over_limit", len(group) - len(take))
        kept += take
    summary.rows_written = len(kept)
    return kept, summary
