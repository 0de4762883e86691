"""A static HTML report of every benchmark under a root, and of its evaluation.

    python -m pipelines.report --root ROOT [--out DIR] [--sample N] [--events N] [--seed S]

Writes ``index.html`` (every benchmark with its counts), one page per benchmark (its card, the
funnel of its build, the quality section, a seeded sample of items with their articles, its
timelines or outlines, its leaderboard rows with intervals, its drift and its audit) and
``evaluation.html`` (the whole leaderboard, drift, audit) under ``--out`` (default
``ROOT/report/``). Plain files with relative links: open them from disk, or copy the folder
anywhere. Reads only what it shows: see ``pipelines.report.read``. See docs/report.md.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from pipelines.report import read
from pipelines.report.native import VIEWS
from pipelines.report.views import audit_view, evaluation_view, item_view, leaderboard_view
from udfs import storage
from udfs.cli import InputError, check_options, option
from udfs.layout import Layout
from udfs.report_view import fmt, funnel, funnel_colors, funnel_svg, interval, quality_rows
from udfs.svg_charts import KEPT

log = logging.getLogger("report")
TEMPLATES = Path(__file__).resolve().parent / "templates"
PAGES = ("index.html", "evaluation.html", "style.css")


@dataclass(frozen=True)
class Config:
    """One report of a root."""

    root: str = option(help="root URI holding benchmarks/ and eval/ (a path, file:// or s3://)")
    out: str | None = option(None, help="where the pages go (a path, file:// or s3://); default ROOT/report")
    sample: int = option(20, help="items shown per benchmark, spread over its tasks", min=1, max=500)
    events: int = option(5, help="complex events / TCEs shown per benchmark with timelines", min=1, max=100)
    seed: int = option(0, help="seed of the item and event samples (same seed, same pages)")

    def __post_init__(self) -> None:
        check_options(self)

    @property
    def out_uri(self) -> str:
        return self.out or Layout(self.root).path("report")


def environment() -> jinja2.Environment:
    """The report's templates: strict (an undefined name is an error) and HTML-escaped."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.globals["interval"] = interval
    return env


def page_name(benchmark: str) -> str:
    return f"{benchmark}.html"


def benchmark_page(
    root: str, name: str, config: Config, drift: list[dict], audit: dict | None
) -> dict[str, Any]:
    """Everything one benchmark page shows."""
    card = read.read_card(root, name)
    tables = read.table_rows(root, name)
    index = read.item_index(root, name)
    items = read.sample_items(root, name, index, config.sample, config.seed)
    wanted = {
        a
        for i in items
        for a in (i["context_article_ids"] or [])
        + (i["gold_article_ids"] or [])
        + (i["evidence_article_ids"] or [])
    }
    found = read.articles(root, wanted)
    steps = funnel(card, read.rejected_counts(root, name), len(index) if "eval_items" in tables else None)
    native = VIEWS[name](root, config.events, config.seed) if name in VIEWS else None
    board = read.leaderboard(root, name)
    return {
        "name": name,
        "card": card,
        "quality": quality_rows(card["quality"]) if card.get("quality") else None,
        "tables": tables,
        "items_total": len(index),
        "items_by_split": read.count_by(index, "split"),
        "items_by_task": read.count_by(index, "task"),
        "sample": [item_view(i, found) for i in items],
        "steps": steps,
        "funnel_svg": funnel_svg(steps),
        "kept_color": KEPT,
        "reason_colors": funnel_colors(steps),
        "native": native,
        "leaderboard": leaderboard_view(board, [r for r in drift if r["benchmark"] == name]),
        "audit": audit_view(audit.get("benchmarks", {}).get(name)) if audit else None,
        "audit_present": audit is not None,
    }


def summary_row(page: dict[str, Any]) -> dict[str, Any]:
    """One benchmark's line of the index."""
    card, audit = page["card"], page["audit"]
    total = (card.get("llm_cost") or {}).get("total", {})
    return {
        "name": page["name"],
        "href": page_name(page["name"]),
        "built_at": (card.get("built_at") or "–").replace("T", " ")[:16],
        "model": f"{card['model']['backend']}:{card['model']['model']}" if card.get("model") else "–",
        "n_items": page["items_total"],
        "by_split": page["items_by_split"],
        "by_task": page["items_by_task"],
        "rejected": page["tables"].get("rejected", 0),
        "requests": total.get("requests_total", 0),
        "tokens": total.get("input_tokens", 0) + total.get("output_tokens", 0),
        "tables": {k: v for k, v in page["tables"].items() if k not in ("eval_items", "rejected")},
        "violations": audit["violations"] if audit else None,
    }


def run(config: Config) -> str:
    """Write the report; returns the URI of its index page."""
    root = config.root
    Layout(root).check_root()
    names = read.discover_benchmarks(root)
    board = read.leaderboard(root)
    if not names and not board:
        raise InputError(f"nothing to report under {root}: no benchmarks/<name>/dataset_card.json, no eval/")
    drift, audit = read.drift(root), read.audit(root)
    env = environment()
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    common = {"root": storage.normalize_uri(root), "generated": generated, "benchmarks": names}
    pages = []
    for name in names:
        log.info("benchmark %s", name)
        page = benchmark_page(root, name, config, drift, audit)
        pages.append(page)
        html = env.get_template("benchmark.html.j2").render(**common, page=page, title=name)
        storage.write_bytes(storage.join(config.out_uri, page_name(name)), html.encode())
    png = read.drift_png(root)
    if png is not None:
        storage.write_bytes(storage.join(config.out_uri, "drift.png"), png)
    evaluation = evaluation_view(board, drift, audit, names, page_name)
    html = env.get_template("evaluation.html.j2").render(
        **common, title="evaluation", ev=evaluation, drift_png=png is not None
    )
    storage.write_bytes(storage.join(config.out_uri, "evaluation.html"), html.encode())
    rows = [summary_row(p) for p in pages]
    html = env.get_template("index.html.j2").render(**common, title="benchmarks", rows=rows, ev=evaluation)
    index_uri = storage.join(config.out_uri, "index.html")
    storage.write_bytes(index_uri, html.encode())
    storage.write_bytes(storage.join(config.out_uri, "style.css"), (TEMPLATES / "style.css").read_bytes())
    log.info("%d benchmark pages, index at %s", len(pages), index_uri)
    print(index_uri)
    return index_uri
