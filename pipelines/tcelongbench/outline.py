"""S2–S5 — the outline of every TCE: article summaries, one summary per day, key points, their
dedup and noise filter, and each kept point's gold article."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from pipelines.llm.ledger import Ledger, failure_reason
from pipelines.llm.stage import LLMStage
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.formation import Events
from udfs.embeddings import embed
from udfs.ids import stable_id
from udfs.tcelongbench import outline, tce


def summarise_articles(ledger: Ledger, stage: LLMStage, events: Events) -> list[dict[str, Any]]:
    """S2: a summary of every TCE article; the parsed rows."""
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
    out = ledger.run(stage, rows, unit="article", id_column="article_id", parent_column="tce_id")
    return [r for r in out.to_pylist() if r["parse_ok"]]


def summarise_days(
    ledger: Ledger, stage: LLMStage, events: Events, summarised: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """S3: one summary per TCE day. A single-article day reuses its article summary; a day with
    more summarised articles goes to the LLM; a day with none is rejected."""
    by_day: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in summarised:
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
    return sorted(singles + merged, key=lambda d: (d["tce_id"], d["k"]))


def extract_key_points(ledger: Ledger, stage: LLMStage, days: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """S4: the key points of every day summary, numbered ``j`` = 1, 2, … within the day."""
    out = ledger.run(stage, days, unit="day", id_column="day_id", parent_column="tce_id")
    return [
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


def filter_points(config: Config, ledger: Ledger, raw_points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """S5: dedup and noise-filter the key points of every TCE (order ``(date, j)``); every point
    is returned with its status and scores, dropped ones also as rejected rows."""
    step = ledger.step("key_point_filter")
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in raw_points:
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
    return out


def attach_gold_articles(config: Config, points: list[dict[str, Any]], events: Events) -> None:
    """Set ``gold_article_id``/``gold_sim`` on every kept point: the article of its date with the
    highest MiniLM cosine."""
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
