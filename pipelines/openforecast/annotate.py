"""Timeline annotation: extraction, then complement round by round, merge fallback, chronology
adjustment, per-event timestamps and structured events.

Round 0 extracts a timeline from each CE's first document (one stage for Wikipedia pages, one for
WCEP stories). Round r (1 ≤ r < max_docs) is ONE stage over every WCEP CE that is still alive
and has an r-th document: it completes the timeline with that document. When a round's answer
keeps fewer than 80% of the previous items verbatim, a merge stage for that round folds the
answer into the previous timeline. Every round has its own stage name (``timeline_rNN``,
``merge_rNN``), so an interrupted build resumes at the round it reached, and every CE gets one
provenance row per round. Each public function is a builder step (``pipelines.builders.Step``):
it reads and updates the run's ``State`` (``timelines``, ``rounds``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pipelines.builders import Build
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import LLMStage
from pipelines.openforecast.config import Config
from pipelines.openforecast.stages import (
    REORDER_COLUMN,
    adjust_stage,
    date_stage,
    reorder_row,
    structured_stage,
    timeline_stage,
)
from pipelines.openforecast.state import State
from udfs.openforecast import timeline as tl
from udfs.text import first_words


def _date(value: Any) -> str:
    return value.isoformat() if value is not None else "unknown"


def _pick(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The kept sample of each CE (the first parseable non-empty one)."""
    by_ce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_ce[r["ce_id"]].append(r)
    return {ce_id: tl.first_parseable(samples) for ce_id, samples in by_ce.items()}


def _provenance(ce_id: str, rnd: int, row: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A ``timeline_rounds`` row: which request gave what, plus the round's fields."""
    return {
        "ce_id": ce_id,
        "round": rnd,
        **{k: row[k] for k in ("stage", "prompt_id", "prompt_version", "model", "sample_index", "raw_text")},
        "answer": list(row["events"] or []) if row["parse_ok"] else None,
        "error": None if row["parse_ok"] else row["parse_error"],
        **fields,
    }


def _text(config: Config, doc: dict[str, Any]) -> str:
    return first_words(doc["text"], config.max_doc_words)


def _run(
    ledger: Ledger, stage: LLMStage, rows: list[dict[str, Any]], id_column: str, unit: str = "ce"
) -> list[dict]:
    """An LLM stage over complex events (or their events); failed rows are recorded."""
    out = ledger.run(stage, rows, unit=unit, id_column=id_column, parent_column="ce_id")
    return out.to_pylist()


def extract(b: Build[Config], s: State) -> None:
    """Round 0: one extraction stage per source, over every CE's first document."""
    step = b.ledger.step("timeline_extract")
    for source, name, prompt_id, samples in (
        ("wikipedia", "timeline_wikipedia", "openforecast.extract_wiki", 1),
        ("wcep", "timeline_r00", "openforecast.extract_news", b.config.timeline_samples),
    ):
        group = [ce for ce in s.ces if ce["source"] == source]
        rows = [
            {
                "ce_id": ce["ce_id"],
                "title": ce["docs"][0]["title"],
                "article": _text(b.config, ce["docs"][0]),
                "date": _date(ce["docs"][0]["date"]),
            }
            for ce in group
        ]
        if source == "wikipedia":
            rows = [{k: v for k, v in r.items() if k != "date"} for r in rows]
        stage = timeline_stage(name, prompt_id, samples)
        picked = _pick(_run(b.ledger, stage, rows, "title"))
        for ce in group:
            row = picked[ce["ce_id"]]
            doc = ce["docs"][0]
            events = list(row["events"] or []) if row["parse_ok"] else []
            if events:
                b.ledger.keep(step)
                s.timelines[ce["ce_id"]] = events
                action = "extract"
            else:
                reason = row["parse_error"] or "model answered None"
                b.ledger.drop(step, "no_timeline", unit="ce", item_id=ce["ce_id"], detail=reason)
                action = "no_timeline"
            s.rounds.append(
                _provenance(
                    ce["ce_id"],
                    0,
                    row,
                    doc_seq=0,
                    doc_date=doc["date"],
                    action=action,
                    retention=None,
                    timeline_before=[],
                    timeline_after=events,
                )
            )
    step.finish()


def complement(b: Build[Config], s: State) -> None:
    """Rounds 1..max_docs−1, each one batched stage; ``s.complement_rounds``: the rounds run."""
    step = b.ledger.step("timeline_complement")
    rounds = 0
    for rnd in range(1, b.config.max_docs):
        active = [ce for ce in s.ces if ce["ce_id"] in s.timelines and len(ce["docs"]) > rnd]
        if not active:
            break
        rounds += 1
        rows = []
        for ce in active:
            doc, prev = ce["docs"][rnd], ce["docs"][rnd - 1]
            rows.append(
                {
                    "ce_id": ce["ce_id"],
                    "timeline_date": _date(prev["date"]),
                    "timeline": tl.render(s.timelines[ce["ce_id"]]),
                    "date": _date(doc["date"]),
                    "title": doc["title"],
                    "article": _text(b.config, doc),
                }
            )
        stage = timeline_stage(f"timeline_r{rnd:02d}", "openforecast.complement", b.config.timeline_samples)
        picked = _pick(_run(b.ledger, stage, rows, "title"))
        to_merge = []
        for ce in active:
            ce_id, row = ce["ce_id"], picked[ce["ce_id"]]
            before = s.timelines[ce_id]
            answer = list(row["events"] or []) if row["parse_ok"] else []
            if answer and tl.needs_merge(before, answer):
                to_merge.append((ce, answer, row))
                continue
            if answer:
                b.ledger.keep(step)
                s.timelines[ce_id] = answer
            else:
                reason = row["parse_error"] or "empty"
                b.ledger.drop(
                    step, "complement_failed", unit="ce", item_id=ce_id, detail=f"round {rnd}: {reason}"
                )
            action = "complement" if answer else "kept_previous"
            _record(s, ce, rnd, row, action, before, tl.retention(before, answer) if answer else None)
        if to_merge:
            _merge(b, s, rnd, to_merge, step)
    step.metrics["rounds"] = rounds
    step.finish()
    s.complement_rounds = rounds


def _record(
    s: State,
    ce: dict[str, Any],
    rnd: int,
    row: dict[str, Any],
    action: str,
    before: list[str],
    retention: float | None,
    after: list[str] | None = None,
) -> None:
    """One provenance row of a complement or merge round."""
    s.rounds.append(
        _provenance(
            ce["ce_id"],
            rnd,
            row,
            action=action,
            doc_seq=rnd,
            doc_date=ce["docs"][rnd]["date"],
            retention=retention,
            timeline_before=before,
            timeline_after=s.timelines[ce["ce_id"]] if after is None else after,
        )
    )


def _merge(
    b: Build[Config], s: State, rnd: int, to_merge: list[tuple[dict, list[str], dict]], step: Any
) -> None:
    """The merge fallback of one round: one stage over every CE whose answer lost items."""
    rows = [
        {
            "ce_id": ce["ce_id"],
            "first_date": _date(ce["docs"][rnd - 1]["date"]),
            "first": tl.render(s.timelines[ce["ce_id"]]),
            "second_date": _date(ce["docs"][rnd]["date"]),
            "second": tl.render(answer),
        }
        for ce, answer, _ in to_merge
    ]
    stage = timeline_stage(f"merge_r{rnd:02d}", "openforecast.merge")
    merged = _pick(_run(b.ledger, stage, rows, "ce_id"))
    for ce, answer, complement_row in to_merge:
        ce_id, row = ce["ce_id"], merged[ce["ce_id"]]
        before = s.timelines[ce_id]
        _record(
            s, ce, rnd, complement_row, "complement_lost_items", before, tl.retention(before, answer), answer
        )
        result = list(row["events"] or []) if row["parse_ok"] else []
        if result:
            b.ledger.keep(step)
            s.timelines[ce_id] = result
        else:
            b.ledger.drop(
                step,
                "merge_failed",
                unit="ce",
                item_id=ce_id,
                detail=f"round {rnd}: {row['parse_error'] or 'empty'}",
            )
        _record(s, ce, rnd, row, "merge" if result else "kept_previous", before, None)


def adjust(b: Build[Config], s: State) -> None:
    """The final chronology adjustment, accepted only when it permutes the input."""
    alive = [ce for ce in s.ces if ce["ce_id"] in s.timelines]
    rows = [
        {
            "ce_id": ce["ce_id"],
            "title": ce["title"],
            "article": _reference(b.config, ce),
            "timeline": tl.render(s.timelines[ce["ce_id"]]),
            REORDER_COLUMN: reorder_row(s.timelines[ce["ce_id"]]),
        }
        for ce in alive
    ]
    out = _pick(_run(b.ledger, adjust_stage(), rows, "title"))
    step = b.ledger.step("adjust_guard")
    for ce in alive:
        ce_id, row = ce["ce_id"], out[ce["ce_id"]]
        before = s.timelines[ce_id]
        answer = list(row["events"] or []) if row["parse_ok"] else []
        if not row["parse_ok"]:
            b.ledger.drop(step, "adjust_failed", unit="ce", item_id=ce_id, detail=row["parse_error"])
        elif not tl.is_permutation(before, answer):
            b.ledger.drop(step, "not_a_permutation", unit="ce", item_id=ce_id, detail=tl.render(answer))
        else:
            b.ledger.keep(step)
            s.timelines[ce_id] = answer
        s.rounds.append(
            _provenance(
                ce_id,
                -1,
                row,
                action="adjust" if s.timelines[ce_id] is not before else "kept_order",
                doc_seq=None,
                doc_date=None,
                retention=None,
                timeline_before=before,
                timeline_after=s.timelines[ce_id],
            )
        )
    step.notes.append("a rejected adjustment keeps the timeline in its previous order")
    step.finish()


def _reference(config: Config, ce: dict[str, Any]) -> str:
    """Wikipedia: the article; WCEP: the CE's dated portal event texts."""
    if ce["source"] == "wikipedia":
        return _text(config, ce["docs"][0])
    return "\n".join(f"{_date(d['date'])}: {d['event_text']}" for d in ce["docs"])


def drop_short(b: Build[Config], s: State) -> None:
    """A final timeline needs ``min_timeline_events`` atomic events."""
    step = b.ledger.step("timeline_length")
    for ce in s.ces:
        events = s.timelines.get(ce["ce_id"])
        if events is None:
            continue
        if len(events) < b.config.min_timeline_events:
            b.ledger.drop(
                step, "too_few_events", unit="ce", item_id=ce["ce_id"], detail=f"{len(events)} events"
            )
            del s.timelines[ce["ce_id"]]
        else:
            b.ledger.keep(step)
    step.finish()


def describe_events(b: Build[Config], s: State) -> None:
    """Per atomic event: its timestamp and structured events (one stage each over all events)."""
    rows = [
        {"ce_id": ce_id, "idx": i, "event": text}
        for ce_id, events in s.timelines.items()
        for i, text in enumerate(events)
    ]
    stamps = _run(b.ledger, date_stage("timestamps", "openforecast.event_time"), rows, "event", "event")
    shapes = _run(b.ledger, structured_stage("structured"), rows, "event", "event")
    described: dict[tuple[str, int], dict[str, Any]] = {}
    for row in stamps:
        described[(row["ce_id"], row["idx"])] = {
            "ts_raw": row["raw_text"],
            "ts": row["ts"] if row["parse_ok"] else None,
            "structured_json": None,
        }
    for row in shapes:
        if row["parse_ok"]:
            described[(row["ce_id"], row["idx"])]["structured_json"] = row["structured_json"]
    step = b.ledger.step("event_dates")
    b.ledger.keep(step, len(described))
    step.metrics.update(
        full_dates=sum(bool(v["ts"]) and v["ts"].count("-") == 2 for v in described.values()),
        partial_dates=sum(bool(v["ts"]) and v["ts"].count("-") < 2 for v in described.values()),
        undated=sum(not v["ts"] for v in described.values()),
        structured=sum(v["structured_json"] is not None for v in described.values()),
    )
    step.finish()
    s.described = described
