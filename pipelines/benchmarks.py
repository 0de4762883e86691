"""Writing a benchmark: its tables under ``<root>/benchmarks/<name>/``, its evaluation items and
its dataset card (counts, configuration, model, prompt versions, LLM cost)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from pipelines.llm.stage import StageRunner
from udfs import storage
from udfs.card_quality import quality_markdown
from udfs.eval_items import items_table
from udfs.layout import Layout
from udfs.report import parse_failures


def write_benchmark_table(
    root: str,
    name: str,
    table_name: str,
    table: pa.Table,
    partition_cols: Sequence[str] = (),
    replace: str = "all",
) -> str:
    """Write one output table of a benchmark; returns its URI."""
    uri = Layout(root).benchmark(name, table_name)
    storage.write_dataset(table, uri, partition_cols, replace=replace)
    return uri


def write_eval_items(
    root: str,
    name: str,
    items: list[dict[str, Any]],
    partition_cols: Sequence[str] = ("split",),
    replace: str = "all",
) -> pa.Table:
    """Validate the items (``udfs.eval_items``) and write them to ``benchmarks/<name>/eval_items``."""
    table = items_table(items)
    write_benchmark_table(root, name, "eval_items", table, partition_cols, replace)
    return table


def llm_cost(runner: StageRunner) -> dict[str, Any]:
    """Per stage and in total: requests, tokens and failures, from the runner's summaries."""
    keys = (
        "requests_total",
        "requests_unique",
        "requests_cached",
        "requests_computed",
        "input_tokens",
        "output_tokens",
    )
    stages = {}
    for s in runner.summaries:
        stages[s.name] = {k: s.metrics.get(k, 0) for k in keys} | {
            "rows": s.rows_read,
            "failed": s.rows_rejected,
            "parse_failures": parse_failures(s),
            "failures_by_reason": dict(s.rejected),
            "seconds": round(s.seconds, 1),
        }
    total = {k: sum(v[k] for v in stages.values()) for k in (*keys, "rows", "failed", "parse_failures")}
    return {"stages": stages, "total": total}


def write_card(
    root: str,
    name: str,
    runner: StageRunner,
    counts: dict[str, Any],
    config: Any,
    quality: dict[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Write ``dataset_card.json`` and ``dataset_card.md`` for a benchmark and return the card
    (``quality``: its quality section, ``udfs.card_quality``; ``steps``: every step of the run
    in order, rows in, kept and rejected by reason)."""
    card = {
        "benchmark": name,
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "counts": counts,
        **({"quality": quality} if quality is not None else {}),
        **({"steps": steps} if steps is not None else {}),
        "config": plain(config),
        "model": {"backend": runner.llm.backend, "model": runner.llm.model},
        "prompt_versions": dict(sorted(runner.prompts_used.items())),
        "llm_cost": llm_cost(runner),
    }
    layout = Layout(root)
    storage.write_json(layout.benchmark(name, "dataset_card.json"), card)
    storage.write_bytes(layout.benchmark(name, "dataset_card.md"), card_markdown(card).encode())
    return card


def card_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown: counts, steps, quality, model and prompts, LLM cost per stage,
    configuration."""
    lines = [f"# {card['benchmark']} — dataset card", "", f"Built {card['built_at']}.", "", "## Counts", ""]
    lines += _dict_lines(card["counts"])
    if card.get("steps"):
        lines += [
            "",
            "## Steps",
            "",
            "| step | unit | in | kept | rejected |",
            "| --- | --- | ---: | ---: | --- |",
        ]
        lines += [
            f"| {s['step']} | {s['unit']} | {s['read']} | {s['kept']} | "
            + (", ".join(f"{r} {n}" for r, n in s["rejected"].items()) or "—")
            + " |"
            for s in card["steps"]
        ]
    if card.get("quality"):
        lines += ["", *quality_markdown(card["quality"])]
    lines += [
        "",
        "## Model and prompts",
        "",
        f"- backend: `{card['model']['backend']}`",
        f"- model: `{card['model']['model']}`",
    ]
    lines += [f"- {stage}: `{prompt}`" for stage, prompt in card["prompt_versions"].items()]
    lines += [
        "",
        "## LLM cost",
        "",
        "| stage | rows | requests | unique | computed | cached | input tok | output tok | failed | parse failures |",
    ]
    lines += ["| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    rows = [*card["llm_cost"]["stages"].items(), ("**total**", card["llm_cost"]["total"])]
    for stage, c in rows:
        lines.append(
            f"| {stage} | {c['rows']} | {c['requests_total']} | {c['requests_unique']} | {c['requests_computed']} "
            f"| {c['requests_cached']} | {c['input_tokens']} | {c['output_tokens']} | {c['failed']} "
            f"| {c['parse_failures']} |"
        )
    lines += [
        "",
        "## Configuration",
        "",
        "```json",
        json.dumps(card["config"], indent=2, default=str),
        "```",
        "",
    ]
    return "\n".join(lines)


def _dict_lines(data: dict[str, Any], indent: int = 0) -> list[str]:
    lines = []
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"- {key}:")
            lines += _dict_lines(value, indent + 2)
        else:
            lines.append(" " * indent + f"- {key}: {value}")
    return lines


def plain(config: Any) -> Any:
    """A config dataclass as JSON-ready data (scripts and other callables are left out)."""
    if dataclasses.is_dataclass(config):
        return {
            f.name: plain(getattr(config, f.name))
            for f in dataclasses.fields(config)
            if not callable(getattr(config, f.name)) and f.name != "script"
        }
    if isinstance(config, dict):
        return {k: plain(v) for k, v in config.items() if not callable(v)}
    if isinstance(config, list | tuple):
        return [plain(v) for v in config]
    if isinstance(config, dt.date | dt.datetime):
        return config.isoformat()
    return config
