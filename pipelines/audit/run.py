"""Audit every benchmark under a root for temporal and split violations.

    python -m pipelines.audit --root ROOT

Reads each benchmark's ``eval_items``, the stored evaluation results under ``eval/`` and, for
the ids they show, the articles' own publication dates (a projected, filtered read of
``corpus/articles``, one streamed scan: never the corpus in memory). Prints a table per benchmark, writes
``<root>/eval/audit.json`` and exits 1 when anything is violated. See docs/audit.md.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import pyarrow.dataset as ds

from pipelines import builders
from pipelines.evaluate.inputs import discover_benchmarks, read_benchmark_items
from pipelines.evaluate.report import result_tables
from udfs import audit, storage
from udfs.cli import InputError, check_options, option
from udfs.evaluate.scoring import RESULT_SCHEMA
from udfs.layout import Layout
from udfs.schemas import ARTICLES

RESULT_COLUMNS = [
    "item_id",
    "model",
    "setting",
    "mode",
    "forecasting",
    "retrieved_ids",
    "retrieved_dates",
    "t_cut",
]


@dataclass(frozen=True)
class Config:
    """One audit of a root."""

    root: str = option(help="root URI holding benchmarks/ (and eval/, corpus/) (a path, file:// or s3://)")

    def __post_init__(self) -> None:
        check_options(self)


@dataclass
class Report:
    """The audits of every benchmark found, and where the JSON report went."""

    benchmarks: list[audit.BenchmarkAudit]
    uri: str

    @property
    def violations(self) -> int:
        return sum(b.violations for b in self.benchmarks)


def built_benchmarks(root: str) -> set[str]:
    """Names of every ``benchmarks/<name>/`` holding a table, with evaluation items or not."""
    base = Layout(root).path("benchmarks")
    return {PurePosixPath(uri[len(base) + 1 :]).parts[0] for uri in storage.list_files(base, ".parquet")}


def read_results(root: str, name: str, models: list[str]) -> list[dict[str, Any]]:
    """The columns the audit needs of one benchmark's results, every model and setting."""
    rows: list[dict[str, Any]] = []
    for model in models:
        uri = Layout(root).eval(name, model, "results")
        rows += storage.read_table(uri, RESULT_SCHEMA, ["setting"], columns=RESULT_COLUMNS).to_pylist()
    return rows


def event_keys(root: str, name: str, spec: audit.EventKey) -> dict[str, str]:
    """Source id → event key from the benchmark's native tables (absent tables give nothing)."""
    columns = list(dict.fromkeys([spec.id_column, spec.key_column]))
    keys: dict[str, str] = {}
    for table_name in spec.tables:
        uri = Layout(root).benchmark(name, table_name)
        if not storage.list_files(uri, ".parquet"):
            continue
        table = storage.read_table(uri, columns=columns)
        keys.update(zip(table[spec.id_column].to_pylist(), table[spec.key_column].to_pylist(), strict=True))
    return keys


def article_dates(root: str, ids: set[str]) -> dict[str, dt.datetime | None]:
    """``published_at`` (None when undated) of those of ``ids`` in corpus/articles: one streamed
    scan of the two columns needed, filtered to ``ids`` in the reader (never the corpus in memory)."""
    if not ids:
        return {}
    Layout(root).require(ARTICLES)
    scanner = ARTICLES.dataset(root).scanner(
        columns=["article_id", "published_at"], filter=ds.field("article_id").isin(sorted(ids))
    )
    dates: dict[str, dt.datetime | None] = {}
    for batch in scanner.to_batches():
        dates.update(zip(batch["article_id"].to_pylist(), batch["published_at"].to_pylist(), strict=True))
    return dates


def audit_benchmark(root: str, name: str, has_items: bool, models: list[str]) -> audit.BenchmarkAudit:
    """Every check on one benchmark (item checks only when it has ``eval_items``)."""
    result = audit.BenchmarkAudit(name)
    if not has_items and not models:
        result.skipped |= set(audit.KINDS)
        result.notes.append("no eval_items and no stored results: nothing to check")
        return result
    items = read_benchmark_items(root, name).to_pylist() if has_items else []
    results = read_results(root, name, models)
    result.items, result.results = len(items), len(results)
    by_id = {i["item_id"]: i for i in items}
    if has_items:
        audit.check_cutoffs(items, result)
        audit.check_answers(items, result)
    else:
        result.skipped |= {"missing_t_cut", "answer_in_question", "split_overlap"}
        result.notes.append("no eval_items under benchmarks/: results judged against their own t_cut")
    orphans = sum(r["item_id"] not in by_id for r in results)
    if has_items and orphans:
        result.notes.append(f"{orphans} results have no item in eval_items: judged against their own t_cut")
    exempt = sum(audit.is_gold_context(r) for r in results)
    if exempt:
        result.notes.append(
            f"{exempt} gold_context results (forecasting = False) show gold articles on purpose: "
            "exempt from the cutoff, gold and undated checks"
        )
    refs = audit.item_references(items) + audit.result_references(results, by_id)
    audit.check_references(refs, article_dates(root, audit.referenced_articles(refs)), result)
    if has_items:
        check_splits(root, items, result)
    return result


def check_splits(root: str, items: list[dict[str, Any]], result: audit.BenchmarkAudit) -> None:
    """The split check through the event key its builder declares; skipped, with a note, for a
    benchmark no registered builder declares one for (``pipelines.builders``)."""
    spec = builders.event_key(result.name)
    if spec is None:
        result.skipped.add("split_overlap")
        result.notes.append(
            f"split check skipped: no builder of {result.name} declares its events (pipelines.builders)"
        )
        return
    unmapped = audit.check_splits(items, event_keys(root, result.name, spec), spec.event, result)
    result.notes.append(f"event = {spec.event} ({spec.key_column} of {', '.join(spec.tables)})")
    if unmapped:
        result.notes.append(f"{unmapped} items have no {spec.event} in those tables: split not checked")


def run(config: Config) -> Report:
    """Audit every benchmark (those without items or results are listed as such); print and
    write the report."""
    layout = Layout(config.root)
    layout.check_root()
    with_items = discover_benchmarks(config.root)
    with_results = result_tables(config.root)
    if not with_items and not with_results:
        raise InputError(
            f"no benchmarks under {layout.root}: no benchmarks/*/eval_items and no eval/*/*/results"
        )
    names = sorted(built_benchmarks(config.root) | set(with_items) | set(with_results))
    audits = [audit_benchmark(config.root, n, n in with_items, with_results.get(n, [])) for n in names]
    report = Report(audits, layout.eval("audit.json"))
    storage.write_json(
        report.uri,
        {
            "root": layout.root,
            "violations": report.violations,
            "benchmarks": {a.name: a.to_dict() for a in audits},
        },
    )
    for a in audits:
        print(audit.table(a), end="\n\n")
    checked = sum(t.checked for a in audits for t in a.tallies.values())
    print(
        f"audit total: {report.violations:,} violations in {len(audits)} benchmarks "
        f"({sum(a.items for a in audits):,} items, {sum(a.results for a in audits):,} results, "
        f"{checked:,} checks); report: {report.uri}"
    )
    return report
