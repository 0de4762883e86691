"""Complex-event collection: Wikipedia pages that describe events, and WCEP stories with their
documents; then the split of every CE by its date."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.builders import Build
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import LLMStage
from pipelines.openforecast.config import Config
from pipelines.openforecast.stages import date_stage, heading_stage
from pipelines.openforecast.state import State
from udfs.ids import stable_id
from udfs.openforecast import stories, wiki
from udfs.openforecast.dates import period
from udfs.openforecast.temporal import SplitCutoffs
from udfs.schemas import ARTICLES, WCEP_EVENTS, WIKI_PAGES
from udfs.urls import norm_url

CATEGORY = LLMStage("wiki_category", "openforecast.page_category")
LIGHT_COLUMNS = ["page_id", "title", "ns", "is_redirect", "n_words", "categories", "dump"]
ARTICLE_COLUMNS = ["article_id", "canonical_url", "title", "text", "language"]


def collect(b: Build[Config], s: State) -> None:
    """The complex events: WCEP stories first (no model call, so a bad story key fails fast),
    then Wikipedia pages up to what ``--limit`` leaves; then the split of each."""
    wcep = collect_wcep(b.config, b.ledger)
    budget = None if b.config.limit is None else b.config.limit - len(wcep)
    s.ces = assign_splits(collect_wikipedia(b.config, b.ledger, budget) + wcep, b.config.cutoffs, b.ledger)


def collect_wikipedia(config: Config, ledger: Ledger, budget: int | None) -> list[dict[str, Any]]:
    """Pages → event CEs: filters, LLM category (keep Event), LLM date (drop before 1950), heading.
    ``budget`` (the rest of ``--limit``) keeps the first candidates by title before any model call."""
    wanted = set(config.wiki_titles)
    step = ledger.step("wiki_filter")
    passing: set[tuple[int, str]] = set()
    found: set[str] = set()
    # A dump holds millions of pages: their light columns are read a batch at a time.
    for batch in WIKI_PAGES.dataset(config.root).to_batches(columns=LIGHT_COLUMNS):
        for p in batch.to_pylist():
            found.update({p["title"]} & wanted)
            reason = (
                ("not_selected" if wanted and p["title"] not in wanted else None)
                or wiki.base_reject_reason(p, config.wiki_min_words)
                or (None if wiki.has_event_category(p["categories"]) else "no_event_category")
            )
            if reason:
                ledger.drop(step, reason, unit="page", item_id=p["title"])
            else:
                passing.add((p["page_id"], p["dump"]))
    _check_names("page", wanted, found)
    full = []
    if passing:
        ids = pa.array(sorted({i for i, _ in passing}), pa.int64())
        full = [
            p
            for p in WIKI_PAGES.read(config.root, filter=pc.field("page_id").isin(ids)).to_pylist()
            if (p["page_id"], p["dump"]) in passing
        ]
    candidates = []
    for p in sorted(full, key=lambda p: (p["title"], p["dump"])):
        if not wiki.has_event_section(p["sections"]):
            ledger.drop(step, "no_event_section", unit="page", item_id=p["title"])
        elif budget is not None and len(candidates) >= max(budget, 0):
            ledger.drop(step, "over_limit", unit="page", item_id=p["title"])
        else:
            ledger.keep(step)
            candidates.append({**p, "ce_id": stable_id("wikipedia", p["dump"], p["page_id"])})
    step.finish()

    rows = [
        {
            "ce_id": p["ce_id"],
            "title": p["title"],
            "article": wiki.classification_text(p, config.max_doc_words),
        }
        for p in candidates
    ]
    labelled = _run(ledger, CATEGORY, rows)
    step = ledger.step("wiki_events")
    events = {}
    for r in labelled:
        if not r["parse_ok"]:
            continue
        if r["raw_text"] == wiki.EVENT_LABEL:
            ledger.keep(step)
            events[r["ce_id"]] = r
        else:
            ledger.drop(
                step,
                "not_an_event",
                unit="page",
                item_id=r["title"],
                parent_id=r["ce_id"],
                detail=r["raw_text"],
            )
    step.finish()

    pages_by_id = {p["ce_id"]: p for p in candidates if p["ce_id"] in events}
    rows = [
        {"ce_id": i, "title": p["title"], "article": wiki.date_text(p, config.max_doc_words)}
        for i, p in pages_by_id.items()
    ]
    dated = _run(ledger, date_stage("wiki_date", "openforecast.page_date"), rows)
    step = ledger.step("wiki_time_filter")
    kept = {}
    for r in dated:
        if not r["parse_ok"]:
            continue
        if period(r["ts"]).last_day < dt.date(config.min_year, 1, 1):
            ledger.drop(
                step,
                f"before_{config.min_year}",
                unit="page",
                item_id=r["title"],
                parent_id=r["ce_id"],
                detail=r["ts"],
            )
        else:
            ledger.keep(step)
            kept[r["ce_id"]] = r["ts"]
    step.finish()

    rows = [
        {
            "ce_id": i,
            "title": pages_by_id[i]["title"],
            "article": wiki.classification_text(pages_by_id[i], config.max_doc_words),
        }
        for i in kept
    ]
    headings = {
        r["ce_id"]: r["raw_text"] if r["parse_ok"] else None for r in _run(ledger, heading_stage(), rows)
    }
    ces = []
    for ce_id, date_raw in kept.items():
        page = pages_by_id[ce_id]
        ces.append(
            {
                "ce_id": ce_id,
                "source": "wikipedia",
                "key": page["title"],
                "title": page["title"],
                "category": headings.get(ce_id),
                "ce_date_raw": date_raw,
                "docs": [
                    {
                        "seq": 0,
                        "date": None,
                        "title": page["title"],
                        "text": wiki.timeline_text(page),
                        "url": None,
                        "article_id": None,
                        "event_id": None,
                        "event_text": None,
                        "is_fallback": False,
                    }
                ],
            }
        )
    return ces


def collect_wcep(config: Config, ledger: Ledger) -> list[dict[str, Any]]:
    """Portal events → story CEs with at most ``max_docs`` documents each, in time order."""
    groups = stories.group_by_story(WCEP_EVENTS.read(config.root).to_pylist())
    wanted = set(config.wcep_stories)
    _check_names("story", wanted, set(groups))
    step = ledger.step("wcep_stories")
    selected = {}
    for key, events in groups.items():
        if wanted and key not in wanted:
            ledger.drop(step, "not_selected", unit="story", item_id=key)
        else:
            selected[key] = events
    urls = sorted(
        {
            u
            for events in selected.values()
            for e in events
            for u in map(norm_url, e["source_urls"] or ())
            if u
        }
    )
    articles = stories.article_index(_articles_at(config.root, urls).to_pylist()) if urls else {}
    assembled = []
    for key, events in sorted(selected.items()):
        ce = stories.assemble(key, events, articles, config.max_docs, config.wcep_min_events)
        if ce.reject_reason:
            ledger.drop(step, ce.reject_reason, unit="story", item_id=key, parent_id=ce.ce_id)
        elif config.limit is not None and len(assembled) >= config.limit:
            ledger.drop(step, "over_limit", unit="story", item_id=key, parent_id=ce.ce_id)
        else:
            ledger.keep(step)
            assembled.append(ce)
    step.metrics.update(stories_with_every_prefix=len(groups), articles_matched=len(articles))
    step.finish()

    docs_step = ledger.step("wcep_documents")
    ces = []
    for ce in assembled:
        for doc, reason in ce.dropped_docs:
            ledger.drop(docs_step, reason, unit="document", item_id=doc["event_text"], parent_id=ce.ce_id)
        ledger.keep(docs_step, len(ce.docs))
        ces.append(
            {
                "ce_id": ce.ce_id,
                "source": "wcep",
                "key": ce.key,
                "title": ce.title,
                "category": ce.category,
                "ce_date_raw": ce.ce_date.isoformat(),
                "docs": ce.docs,
            }
        )
    docs = [d for ce in ces for d in ce["docs"]]
    docs_step.metrics.update(
        fallback_documents=sum(d["is_fallback"] for d in docs),
        article_documents=sum(not d["is_fallback"] for d in docs),
    )
    docs_step.finish()
    return ces


def _articles_at(root: str, urls: list[str]) -> pa.Table:
    """The corpus articles at ``urls`` in two passes over one listing: the URL and key columns of
    every article (a small share of the corpus's bytes, streamed batch by batch), then the full
    rows of the matches, from their days' partitions only."""
    dataset = ARTICLES.dataset(root)
    keys = dataset.to_table(
        columns=["article_id", "published_date"], filter=pc.field("canonical_url").isin(pa.array(urls))
    )
    days, ids = pc.unique(keys.column("published_date")), pc.unique(keys.column("article_id"))
    in_days = pc.field("published_date").isin(days.drop_null())
    if days.null_count:
        in_days = in_days | pc.field("published_date").is_null()
    return dataset.to_table(columns=ARTICLE_COLUMNS, filter=in_days & pc.field("article_id").isin(ids))


def _run(ledger: Ledger, stage: LLMStage, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An LLM stage over Wikipedia candidate pages (failed rows are recorded by the ledger)."""
    return ledger.run(stage, rows, unit="page", id_column="title", parent_column="ce_id").to_pylist()


def _check_names(kind: str, wanted: set[str], present: set[str]) -> None:
    """A selected page or story that is not in the corpus is a typo, not an empty run."""
    missing = sorted(wanted - present)
    if missing:
        raise ValueError(f"no {kind} named {missing[:5]} in the corpus")


def assign_splits(ces: list[dict[str, Any]], cutoffs: SplitCutoffs, ledger: Ledger) -> list[dict[str, Any]]:
    """Each CE's split by its date (a partial date counts as its last day); later CEs drop."""
    step = ledger.step("splits")
    kept = []
    for ce in ces:
        ce_period = period(ce["ce_date_raw"])
        split = cutoffs.assign(ce_period)
        if split is None:
            ledger.drop(
                step,
                "after_test_end",
                unit="ce",
                item_id=ce["title"],
                parent_id=ce["ce_id"],
                detail=ce["ce_date_raw"],
            )
            continue
        cutoffs.check_ce(split, ce_period)
        ledger.keep(step)
        kept.append(
            {**ce, "ce_date": ce_period.last_day, "split": split, "split_start": cutoffs.start(split)}
        )
    step.metrics.update({f"ces_{s}": sum(ce["split"] == s for ce in kept) for s in ("train", "dev", "test")})
    step.finish()
    return kept
