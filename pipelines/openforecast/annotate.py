"""Timeline annotation: extraction, then complement round by round, merge fallback, chronology
adjustment, per-event timestamps and structured events.

Round 0 extracts a timeline from each CE's first document (one stage for Wikipedia pages, one for
WCEP stories). Round r (1 ≤ r < max_docs) is ONE stage over every WCEP CE that is still alive
and has an r-th document: it completes the timeline with that document. When a round's answer
keeps fewer than 80% of the previous items verbatim, a merge stage for that round folds the
answer into the previous timeline. Every round has its own stage name (``timeline_rNN``,
``merge_rNN``), so an interrupted build resumes at the round it reached, and every CE gets one
provenance row per round.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

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


class Annotator:
    """Runs the timeline stages of one build and keeps each CE's timeline and provenance."""

    def __init__(self, config: Config, ledger: Ledger):
        self.config, self.ledger = config, ledger
        self.cap = config.llm.max_new_tokens
        self.timelines: dict[str, list[str]] = {}
        self.rounds: list[dict[str, Any]] = []

    def _text(self, doc: dict[str, Any]) -> str:
        return first_words(doc["text"], self.config.max_doc_words)

    def _run(
        self, stage: LLMStage, rows: list[dict[str, Any]], id_column: str, unit: str = "ce"
    ) -> list[dict]:
        """An LLM stage over complex events (or their events); failed rows are recorded."""
        out = self.ledger.run(stage, rows, unit=unit, id_column=id_column, parent_column="ce_id")
        return out.to_pylist()

    def extract(self, ces: list[dict[str, Any]]) -> None:
        """Round 0: one extraction stage per source, over every CE's first document."""
        step = self.ledger.step("timeline_extract")
        for source, name, prompt_id, samples in (
            ("wikipedia", "timeline_wikipedia", "openforecast.extract_wiki", 1),
            ("wcep", "timeline_r00", "openforecast.extract_news", self.config.timeline_samples),
        ):
            group = [ce for ce in ces if ce["source"] == source]
            rows = [
                {
                    "ce_id": ce["ce_id"],
                    "title": ce["docs"][0]["title"],
                    "article": self._text(ce["docs"][0]),
                    "date": _date(ce["docs"][0]["date"]),
                }
                for ce in group
            ]
            if source == "wikipedia":
                rows = [{k: v for k, v in r.items() if k != "date"} for r in rows]
            stage = timeline_stage(name, prompt_id, self.cap, samples)
            picked = _pick(self._run(stage, rows, "title"))
            for ce in group:
                row = picked[ce["ce_id"]]
                doc = ce["docs"][0]
                events = list(row["events"] or []) if row["parse_ok"] else []
                if events:
                    self.ledger.keep(step)
                    self.timelines[ce["ce_id"]] = events
                    action = "extract"
                else:
                    reason = row["parse_error"] or "model answered None"
                    self.ledger.drop(step, "no_timeline", unit="ce", item_id=ce["ce_id"], detail=reason)
                    action = "no_timeline"
                self.rounds.append(
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

    def complement(self, ces: list[dict[str, Any]]) -> int:
        """Rounds 1..max_docs−1, each one batched stage; returns the number of rounds run."""
        step = self.ledger.step("timeline_complement")
        rounds = 0
        for rnd in range(1, self.config.max_docs):
            active = [ce for ce in ces if ce["ce_id"] in self.timelines and len(ce["docs"]) > rnd]
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
                        "timeline": tl.render(self.timelines[ce["ce_id"]]),
                        "date": _date(doc["date"]),
                        "title": doc["title"],
                        "article": self._text(doc),
                    }
                )
            stage = timeline_stage(
                f"timeline_r{rnd:02d}", "openforecast.complement", self.cap, self.config.timeline_samples
            )
            picked = _pick(self._run(stage, rows, "title"))
            to_merge = []
            for ce in active:
                ce_id, row = ce["ce_id"], picked[ce["ce_id"]]
                before = self.timelines[ce_id]
                answer = list(row["events"] or []) if row["parse_ok"] else []
                if answer and tl.needs_merge(before, answer):
                    to_merge.append((ce, answer, row))
                    continue
                if answer:
                    self.ledger.keep(step)
                    self.timelines[ce_id] = answer
                else:
                    reason = row["parse_error"] or "empty"
                    self.ledger.drop(
                        step, "complement_failed", unit="ce", item_id=ce_id, detail=f"round {rnd}: {reason}"
                    )
                action = "complement" if answer else "kept_previous"
                self._record(ce, rnd, row, action, before, tl.retention(before, answer) if answer else None)
            if to_merge:
                self._merge(rnd, to_merge, step)
        step.metrics["rounds"] = rounds
        step.finish()
        return rounds

    def _record(
        self,
        ce: dict[str, Any],
        rnd: int,
        row: dict[str, Any],
        action: str,
        before: list[str],
        retention: float | None,
        after: list[str] | None = None,
    ) -> None:
        """One provenance row of a complement or merge round."""
        self.rounds.append(
            _provenance(
                ce["ce_id"],
                rnd,
                row,
                action=action,
                doc_seq=rnd,
                doc_date=ce["docs"][rnd]["date"],
                retention=retention,
                timeline_before=before,
                timeline_after=self.timelines[ce["ce_id"]] if after is None else after,
            )
        )

    def _merge(self, rnd: int, to_merge: list[tuple[dict, list[str], dict]], step: Any) -> None:
        """The merge fallback of one round: one stage over every CE whose answer lost items."""
        rows = [
            {
                "ce_id": ce["ce_id"],
                "first_date": _date(ce["docs"][rnd - 1]["date"]),
                "first": tl.render(self.timelines[ce["ce_id"]]),
                "second_date": _date(ce["docs"][rnd]["date"]),
                "second": tl.render(answer),
            }
            for ce, answer, _ in to_merge
        ]
        stage = timeline_stage(f"merge_r{rnd:02d}", "openforecast.merge", self.cap)
        merged = _pick(self._run(stage, rows, "ce_id"))
        for ce, answer, complement_row in to_merge:
            ce_id, row = ce["ce_id"], merged[ce["ce_id"]]
            before = self.timelines[ce_id]
            self._record(
                ce, rnd, complement_row, "complement_lost_items", before, tl.retention(before, answer), answer
            )
            result = list(row["events"] or []) if row["parse_ok"] else []
            if result:
                self.ledger.keep(step)
                self.timelines[ce_id] = result
            else:
                self.ledger.drop(
                    step,
                    "merge_failed",
                    unit="ce",
                    item_id=ce_id,
                    detail=f"round {rnd}: {row['parse_error'] or 'empty'}",
                )
            self._record(ce, rnd, row, "merge" if result else "kept_previous", before, None)

    def adjust(self, ces: list[dict[str, Any]]) -> None:
        """The final chronology adjustment, accepted only when it permutes the input."""
        alive = [ce for ce in ces if ce["ce_id"] in self.timelines]
        rows = [
            {
                "ce_id": ce["ce_id"],
                "title": ce["title"],
                "article": self._reference(ce),
                "timeline": tl.render(self.timelines[ce["ce_id"]]),
                REORDER_COLUMN: reorder_row(self.timelines[ce["ce_id"]]),
            }
            for ce in alive
        ]
        out = _pick(self._run(adjust_stage(), rows, "title"))
        step = self.ledger.step("adjust_guard")
        for ce in alive:
            ce_id, row = ce["ce_id"], out[ce["ce_id"]]
            before = self.timelines[ce_id]
            answer = list(row["events"] or []) if row["parse_ok"] else []
            if not row["parse_ok"]:
                self.ledger.drop(step, "adjust_failed", unit="ce", item_id=ce_id, detail=row["parse_error"])
            elif not tl.is_permutation(before, answer):
                self.ledger.drop(
                    step, "not_a_permutation", unit="ce", item_id=ce_id, detail=tl.render(answer)
                )
            else:
                self.ledger.keep(step)
                self.timelines[ce_id] = answer
            self.rounds.append(
                _provenance(
                    ce_id,
                    -1,
                    row,
                    action="adjust" if self.timelines[ce_id] is not before else "kept_order",
                    doc_seq=None,
                    doc_date=None,
                    retention=None,
                    timeline_before=before,
                    timeline_after=self.timelines[ce_id],
                )
            )
        step.notes.append("a rejected adjustment keeps the timeline in its previous order")
        step.finish()

    def _reference(self, ce: dict[str, Any]) -> str:
        """Wikipedia: the article; WCEP: the CE's dated portal event texts."""
        if ce["source"] == "wikipedia":
            return self._text(ce["docs"][0])
        return "\n".join(f"{_date(d['date'])}: {d['event_text']}" for d in ce["docs"])

    def drop_short(self, ces: list[dict[str, Any]]) -> None:
        step = self.ledger.step("timeline_length")
        for ce in ces:
            events = self.timelines.get(ce["ce_id"])
            if events is None:
                continue
            if len(events) < self.config.min_timeline_events:
                self.ledger.drop(
                    step, "too_few_events", unit="ce", item_id=ce["ce_id"], detail=f"{len(events)} events"
                )
                del self.timelines[ce["ce_id"]]
            else:
                self.ledger.keep(step)
        step.finish()

    def describe_events(self) -> dict[tuple[str, int], dict[str, Any]]:
        """Per atomic event: its timestamp and structured events (one stage each over all events)."""
        rows = [
            {"ce_id": ce_id, "idx": i, "event": text}
            for ce_id, events in self.timelines.items()
            for i, text in enumerate(events)
        ]
        stamps = self._run(date_stage("timestamps", "openforecast.event_time"), rows, "event", "event")
        shapes = self._run(structured_stage("structured", self.cap), rows, "event", "event")
        described: dict[tuple[str, int], dict[str, Any]] = {}
        for s in stamps:
            described[(s["ce_id"], s["idx"])] = {
                "ts_raw": s["raw_text"],
                "ts": s["ts"] if s["parse_ok"] else None,
                "structured_json": None,
            }
        for s in shapes:
            if s["parse_ok"]:
                described[(s["ce_id"], s["idx"])]["structured_json"] = s["structured_json"]
        step = self.ledger.step("event_dates")
        self.ledger.keep(step, len(described))
        step.metrics.update(
            full_dates=sum(bool(v["ts"]) and v["ts"].count("-") == 2 for v in described.values()),
            partial_dates=sum(bool(v["ts"]) and v["ts"].count("-") < 2 for v in described.values()),
            undated=sum(not v["ts"] for v in described.values()),
            structured=sum(v["structured_json"] is not None for v in described.values()),
        )
        step.finish()
        return described
