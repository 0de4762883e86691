"""Export one benchmark's evaluation items as a folder ready for the Hugging Face Hub.

    python -m pipelines.export --root ROOT --benchmark NAME --to DIR

Writes ``DIR/data/<task>/<split>.parquet`` (one config per task, one file per split, the rows of
``eval_items`` unchanged), ``DIR/README.md`` (the Hub's YAML front matter, then the card's text)
and ``DIR/LICENSE.md`` (the terms of the sources). ``DIR`` may be a path or an ``s3://`` URI;
its ``data/`` is replaced, other files in it are left alone. Load it with
``datasets.load_dataset(DIR, "all")`` or one task's config. See docs/export.md.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow.compute as pc
import pyarrow.dataset as ds

from pipelines.report import read
from udfs import hub_card, storage
from udfs.cli import InputError, check_options, option
from udfs.eval_items import EVAL_ITEM_SCHEMA
from udfs.layout import Layout
from udfs.schemas import ARTICLES

log = logging.getLogger("export")
SPLIT_NAME = r"^\w+(\.\w+)*$"  # what the Hub accepts as a split name


@dataclass(frozen=True)
class Config:
    """One benchmark exported to one folder."""

    root: str = option(help="root URI holding benchmarks/ (a path, file:// or s3://)")
    benchmark: str = option(help="the benchmark to export (a name under ROOT/benchmarks/)")
    to: str = option(help="the folder to write (a path, file:// or s3://); its data/ is replaced")

    def __post_init__(self) -> None:
        check_options(self)


@dataclass
class Export:
    """What was written: files per task and split, their rows, the README's URI."""

    files: dict[str, dict[str, str]]
    counts: dict[str, dict[str, int]]
    readme: str


def _span(values: list[dt.datetime | dt.date | None]) -> str | None:
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    first, last = (v.date() if isinstance(v, dt.datetime) else v for v in (known[0], known[-1]))
    return f"{first} … {last}"


def spans(root: str, uri: str, ids: set[str]) -> tuple[dict[str, str], dict[str, int]]:
    """The items' cutoff range, the referenced articles' publication range and hosts, and the
    corpus's days (from its partition names; no article is read for it)."""
    span = {}
    cut = _span(read.column_values(uri, "t_cut"))
    if cut:
        span["t_cut"] = cut
    found = read.articles(root, ids)
    published = _span([a["published_at"] for a in found.values()])
    if published:
        span["articles"] = f"{published} ({len(found):,} articles)"
    if storage.exists(Layout(root).table(ARTICLES)):
        days = storage.partition_values(ARTICLES.dataset(root), "published_date")
        if days:
            span["corpus"] = f"{min(days)} … {max(days)} ({len(days):,} days with articles)"
    hosts = Counter(a["host"] or urlparse(a["url"]).hostname or "?" for a in found.values())
    return span, dict(sorted(hosts.items(), key=lambda kv: (-kv[1], kv[0])))


def run(config: Config) -> Export:
    """Write the export; returns what it wrote."""
    root, name = config.root, config.benchmark
    Layout(root).check_root()
    if name not in read.discover_benchmarks(root):
        known = ", ".join(read.discover_benchmarks(root)) or "none"
        raise InputError(f"no benchmark {name!r} under {root} (with a dataset_card.json: {known})")
    index = read.item_index(root, name)
    if not index:
        raise InputError(f"{name} has no evaluation items under {root}: nothing to export")
    bad = sorted({r["split"] for r in index if not re.match(SPLIT_NAME, r["split"])})
    if bad:
        raise InputError(f"{name}: split names {bad} are not valid Hub split names ({SPLIT_NAME})")
    card = read.read_card(root, name)
    uri = Layout(root).benchmark(name, "eval_items")
    storage.delete(storage.join(config.to, "data"))
    files: dict[str, dict[str, str]] = {}
    counts: dict[str, dict[str, int]] = {}
    sizes: dict[str, dict[str, int]] = {}
    referenced: set[str] = set()
    for task, split in sorted({(r["task"], r["split"]) for r in index}):
        where = (ds.field("task") == task) & (ds.field("split") == split)
        table = storage.read_table(uri, EVAL_ITEM_SCHEMA, filter=where).sort_by("item_id")
        table = table.select(EVAL_ITEM_SCHEMA.names).cast(EVAL_ITEM_SCHEMA)
        path = f"data/{task}/{split}.parquet"
        storage.write_table(table, storage.join(config.to, path))
        files.setdefault(task, {})[split] = path
        counts.setdefault(task, {})[split] = table.num_rows
        sizes.setdefault(task, {})[split] = table.nbytes
        for column in ("context_article_ids", "gold_article_ids", "evidence_article_ids"):
            referenced.update(v for v in pc.list_flatten(table[column]).to_pylist() if v)
        log.info("export: %s %s/%s: %d items", name, task, split, table.num_rows)
    span, hosts = spans(root, uri, referenced)
    types = sorted(set(read.column_values(uri, "type")))
    matter = hub_card.front_matter(name, files, counts, sizes, EVAL_ITEM_SCHEMA, types)
    text = hub_card.body(name, card, counts, span, read.rejected_counts(root, name), hosts)
    readme = storage.join(config.to, "README.md")
    storage.write_bytes(readme, hub_card.readme(matter, text).encode())
    storage.write_bytes(storage.join(config.to, "LICENSE.md"), hub_card.licence_text(name).encode())
    total = sum(n for per in counts.values() for n in per.values())
    print(f"exported {total:,} items of {name} ({len(files)} configs) to {storage.normalize_uri(config.to)}")
    return Export(files, counts, readme)
