"""Views of a benchmark's own tables that items alone do not show: OpenForecast's complex events
with their timelines and source documents, TCELongBench's temporal complex events with their
day-by-day outlines and articles. Each view reads a seeded sample of events by id.

``VIEWS`` maps a benchmark to its view; a benchmark without one shows items only."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pyarrow.dataset as ds

from pipelines.report import read
from udfs.layout import Layout
from udfs.report_view import sample_ids


def _sample(uri: str, id_column: str, n: int, seed: int, kept: ds.Expression | None = None) -> list[str]:
    ids = read.column_values(uri, id_column, kept)
    return sample_ids((("", i) for i in ids), n, seed)


def openforecast_timelines(root: str, n: int, seed: int) -> dict[str, Any]:
    """Kept complex events: title, category, date, split, the final timeline (atomic events in
    order, with their times) and the documents it was annotated from."""
    name = "openforecast"
    ce_uri = Layout(root).benchmark(name, "ce")
    ids = _sample(ce_uri, "ce_id", n, seed, ds.field("kept"))
    events: dict[str, list[dict]] = defaultdict(list)
    for row in read.read_rows(Layout(root).benchmark(name, "atomic_event"), "ce_id", ids):
        events[row["ce_id"]].append(row)
    docs: dict[str, list[dict]] = defaultdict(list)
    columns = ["ce_id", "seq", "date", "title", "url", "is_fallback"]
    for row in read.read_rows(Layout(root).benchmark(name, "ce_doc"), "ce_id", ids, columns):
        docs[row["ce_id"]].append(row)
    groups = []
    for ce in sorted(
        read.read_rows(ce_uri, "ce_id", ids), key=lambda r: (r["ce_date"] is None, r["ce_date"])
    ):
        groups.append(
            {
                "title": ce["title"],
                "facts": {
                    "id": ce["ce_id"],
                    "source": ce["source"],
                    "category": ce["category"],
                    "date": ce["ce_date"],
                    "split": ce["split"],
                    "documents": ce["n_docs"],
                },
                "timeline": [
                    {"when": e["ts"], "text": e["text"]}
                    for e in sorted(events[ce["ce_id"]], key=lambda e: e["idx"])
                ],
                "articles": [
                    {
                        "date": d["date"],
                        "title": d["title"],
                        "url": d["url"],
                        "note": "fallback" if d["is_fallback"] else "",
                    }
                    for d in sorted(docs[ce["ce_id"]], key=lambda d: d["seq"])
                ],
            }
        )
    return {"title": "Complex events and their timelines", "kind": "timeline", "groups": groups}


def tcelongbench_outlines(root: str, n: int, seed: int) -> dict[str, Any]:
    """Temporal complex events: span, days, the outline (each day's kept key points, or its
    summary when it has none) and the articles of each day, with titles and links."""
    name = "tcelongbench"
    tce_uri = Layout(root).benchmark(name, "tce")
    ids = _sample(tce_uri, "tce_id", n, seed)
    points: dict[tuple[str, Any], list[str]] = defaultdict(list)
    for kp in sorted(
        read.read_rows(Layout(root).benchmark(name, "key_point"), "tce_id", ids),
        key=lambda r: (r["k"], r["j"]),
    ):
        if kp["status"] == "kept":
            points[kp["tce_id"], kp["date"]].append(kp["text"])
    summaries = {
        (r["tce_id"], r["date"]): r["summary"]
        for r in read.read_rows(Layout(root).benchmark(name, "day_summary"), "tce_id", ids)
    }
    links = read.read_rows(Layout(root).benchmark(name, "tce_article"), "tce_id", ids)
    found = read.articles(root, (r["article_id"] for r in links))
    groups = []
    for tce in sorted(read.read_rows(tce_uri, "tce_id", ids), key=lambda r: r["start_date"]):
        key = tce["tce_id"]
        days = sorted(tce["dates"] or [])
        groups.append(
            {
                "title": f"TCE {key[:8]}: {tce['start_date']} – {tce['end_date']}",
                "facts": {
                    "id": key,
                    "split": tce["split"],
                    "days": len(days),
                    "span (days)": tce["span_days"],
                    "articles": tce["n_articles"],
                },
                "timeline": [
                    {"when": day.isoformat(), "text": text}
                    for day in days
                    for text in (
                        points.get((key, day)) or [summaries.get((key, day), "(no outline for this day)")]
                    )
                ],
                "articles": [
                    _article(found, r["article_id"], r["date"])
                    for r in sorted(
                        (r for r in links if r["tce_id"] == key), key=lambda r: (r["date"], r["article_id"])
                    )
                ],
            }
        )
    return {"title": "Temporal complex events and their outlines", "kind": "outline", "groups": groups}


def _article(found: dict[str, dict], article_id: str, day: Any) -> dict[str, Any]:
    a = found.get(article_id)
    if a is None:
        return {"date": day, "title": f"{article_id} (not in corpus/articles)", "url": None, "note": ""}
    return {"date": day, "title": a["title"] or a["url"], "url": a["url"], "note": a["host"] or ""}


VIEWS: dict[str, Callable[[str, int, int], dict[str, Any]]] = {
    "openforecast": openforecast_timelines,
    "tcelongbench": tcelongbench_outlines,
}
