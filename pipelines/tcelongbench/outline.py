"""S2–S5 — the outline of every TCE: article summaries, one summary per day, key points, their
dedup and noise filter, and each kept point's gold article."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from pipelines.builders import Build
from pipelines.llm.ledger import failure_reason
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.stages import llm_stages
from pipelines.tcelongbench.state import State
from udfs.embeddings import embed
from udfs.ids import stable_id
from udfs.tcelongbench import outline, tce


def summarise_articles(b: Build[Config], s: State) -> None:
    """S2: a summary of every TCE article; ``s.summarised``: the parsed rows."""
    events = s.events
    rows = [
        {
            "tce_id": r["tce_id"],
            "article_id": r["article_id"],
            "k": r["k"],
            "title": events.articles[r["article_id"]].get("title") or "",
            "text": events.text(r["article_id"]),
        }
        for r in events.rows
    ]
    stage = llm_stages(b.config)["article_summary"]
    out = b.ledger.run(stage, rows, unit="article", id_column="article_id", parent_column="tce_id")
    s.summarised = [r for r in out.to_pylist() if r["parse_ok"]]


def summarise_days(b: Build[Config], s: State) -> None:
    """S3: one summary per TCE day (``s.days``). A single-article day reuses its article summary;
    a day with more summarised articles goes to the LLM; a day with none is rejected."""
    ledger, events = b.ledger, s.events
    by_day: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in s.summarised:
        by_day[(row["tce_id"], row["k"])].append(row)
    step = ledger.step("day_summaries")
    singles, multi = [], []
    for t in events.tces:
        for k, date in enumerate(t["dates"], start=1):
            day = {"day_id": stable_id("day", t["tce_id"], k), "tce_id": t["tce_id"], "k": k, "date": date}
            rows = sorted(by_day.get((t["tce_id"], k), []), key=lambda r: r["article_id"])
            if not rows:
                ledger.drop(
                    step,
                    "no_article_summary",
                    unit="day",
                    item_id=day["day_id"],
                    parent_id=t["tce_id"],
                    date=date,
                )
            elif len(rows) == 1:
                ledger.keep(step)
                singles.append({**day, "summary": rows[0]["summary"], "source": "article", "n_summaries": 1})
            else:
                multi.append({**day, "date": date.isoformat(), "summaries": [r["summary"] for r in rows]})
    merged = []
    stage = llm_stages(b.config)["day_summary"]
    out = ledger.run(stage, multi, unit="day", id_column="day_id", parent_column="tce_id")
    for row in out.to_pylist():
        step.rows_read += 1
        if not row["parse_ok"]:  # the rejected row is the stage's
            step.reject(failure_reason(row))
            continue
        step.rows_written += 1
        merged.append(
            {
                **{k: row[k] for k in ("day_id", "tce_id", "k")},
                "date": dt.date.fromisoformat(row["date"]),
                "summary": row["summary"],
                "source": "llm",
                "n_summaries": len(row["summaries"]),
            }
        )
    ledger.close(step)
    s.days = sorted(singles + merged, key=lambda d: (d["tce_id"], d["k"]))


def extract_key_points(b: Build[Config], s: State) -> None:
    """S4: the key points of every day summary (``s.raw_points``), numbered ``j`` = 1, 2, …
    within the day."""
    stage = llm_stages(b.config)["key_points"]
    out = b.ledger.run(stage, s.days, unit="day", id_column="day_id", parent_column="tce_id")
    s.raw_points = [
        {
            "kp_id": stable_id("kp", d["tce_id"], d["k"], j),
            "tce_id": d["tce_id"],
            "k": d["k"],
            "date": d["date"],
            "j": j,
            "text": text,
        }
        for d in out.to_pylist()
        if d["parse_ok"]
        for j, text in enumerate(d["points"], start=1)
    ]


def filter_points(b: Build[Config], s: State) -> None:
    """S5: dedup and noise-filter the key points of every TCE (order ``(date, j)``);
    ``s.key_points``: every point with its status and scores (dropped ones also rejected rows),
    ``s.kept`` the kept ones."""
    config, ledger = b.config, b.ledger
    step = ledger.step("key_point_filter")
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in s.raw_points:
        by_tce[p["tce_id"]].append(p)
    out = []
    for tce_id in sorted(by_tce):
        points = sorted(by_tce[tce_id], key=lambda p: (p["date"], p["j"]))
        vectors = embed([p["text"] for p in points], config.encoder)
        decisions = outline.filter_key_points(vectors, config.kp_dup_threshold, config.kp_noise_threshold)
        for p, d in zip(points, decisions, strict=True):
            dup_of = points[d["dup_of"]]["kp_id"] if d["dup_of"] is not None else None
            out.append({**p, **d, "dup_of": dup_of})
            if d["status"] == "kept":
                ledger.keep(step)
            else:
                ledger.drop(
                    step, d["status"], unit="key_point", item_id=p["kp_id"], parent_id=tce_id, detail=dup_of
                )
    ledger.close(step)
    s.key_points = out
    s.kept = [p for p in out if p["status"] == "kept"]


def attach_gold_articles(b: Build[Config], s: State) -> None:
    """Set ``gold_article_id``/``gold_sim`` on every kept point: the article of its date with the
    highest MiniLM cosine."""
    config, points, events = b.config, s.kept, s.events
    if not points:
        return
    ids = sorted(events.articles)
    index = {a: i for i, a in enumerate(ids)}
    article_vectors = embed([tce.embed_text(events.articles[a]) for a in ids], config.encoder)
    point_vectors = embed([p["text"] for p in points], config.encoder)
    candidates = [[index[a] for a in events.members[(p["tce_id"], p["k"])]] for p in points]
    chosen = outline.choose_gold_articles(point_vectors, article_vectors, candidates)
    for p, (i, score) in zip(points, chosen, strict=True):
        p["gold_article_id"], p["gold_sim"] = ids[i], score
