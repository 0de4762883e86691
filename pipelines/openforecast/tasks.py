"""Questions for the six tasks: sampling per CE (pure, seeded), the MCNC and MCAC generation
stages, their checks, the MCNC leak filter and VQA.

Every question and every generation request is checked against its CE before it leaves this
module (``check_sample_time``): the background is the timeline before the cut and lies before
``t_cut``; targets are not. The MCNC and MCAC generators also read the events after the cut — by
design (the paper's construction): they must know what really happened to write wrong answers
that did not — but those events never reach a question's background.
"""

from __future__ import annotations

from typing import Any

from pipelines.builders import Build
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import LLMStage
from pipelines.openforecast.config import Config
from pipelines.openforecast.stages import mcac_stage, negatives_stage, structured_stage
from pipelines.openforecast.state import State
from udfs.openforecast import questions as q
from udfs.openforecast.structured import load, really_happened
from udfs.openforecast.timeline import render


def _run(ledger: Ledger, stage: LLMStage, rows: list[dict], id_column: str = "sample_id") -> list[dict]:
    """An LLM stage over question requests (failed rows are recorded by the ledger)."""
    return ledger.run(stage, rows, unit="question", id_column=id_column, parent_column="ce_id").to_pylist()


def _listing(events: list[str]) -> str:
    return render(events) if events else "(none)"


def _sample(
    ledger: Ledger, name: str, timelines: dict[str, q.CETimeline], sampler: Any, seed: int
) -> list[dict]:
    step = ledger.step(name)
    drawn = []
    for t in timelines.values():
        got, reason = sampler(t, seed)
        if got:
            ledger.keep(step)
            drawn += got
        else:
            ledger.drop(step, reason, unit="ce", item_id=t.ce_id)
    step.metrics["drawn"] = len(drawn)
    step.finish()
    return drawn


def questions(b: Build[Config], s: State) -> None:
    """The finished timelines (``s.final``: each CE's atomic events with their timestamps and
    structured events), then the questions of every task (``s.samples``)."""
    by_id = {ce["ce_id"]: ce for ce in s.ces}
    s.final = {
        ce_id: q.CETimeline(
            ce_id=ce_id,
            split=by_id[ce_id]["split"],
            split_start=by_id[ce_id]["split_start"],
            category=by_id[ce_id]["category"],
            events=tuple(
                q.AtomicEvent(
                    text=text,
                    ts=s.described[(ce_id, i)]["ts"],
                    structured=_structured(s.described[(ce_id, i)]["structured_json"]),
                )
                for i, text in enumerate(events)
            ),
        )
        for ce_id, events in s.timelines.items()
    }
    s.samples = build_questions(b.config, b.ledger, s.final)


def _structured(cell: str | None) -> tuple[dict[str, Any], ...] | None:
    events = load(cell)
    return None if events is None else tuple(events)


def build_questions(
    config: Config, ledger: Ledger, timelines: dict[str, q.CETimeline]
) -> dict[str, list[dict]]:
    """All questions by task."""
    stf = _sample(ledger, "sample_stf", timelines, q.sample_stf, config.seed)
    ltf = _sample(ledger, "sample_ltf", timelines, q.sample_ltf, config.seed)
    mcnc_requests = _sample(ledger, "sample_mcnc", timelines, q.mcnc_targets, config.seed)
    aqa_requests = _sample(ledger, "sample_aqa_mcac", timelines, q.argument_targets, config.seed)
    for r in mcnc_requests + aqa_requests:  # what the generators are shown as the known timeline
        q.check_sample_time(r, timelines[r["ce_id"]])
    mcnc, vqa = _mcnc(config, ledger, timelines, mcnc_requests)
    aqa, mcac = _mcac(config, ledger, aqa_requests)
    out = {"stf": stf, "ltf": ltf, "aqa": aqa, "mcnc": mcnc, "mcac": mcac, "vqa": vqa}
    for samples in out.values():
        for s in samples:
            q.check_sample_time(s, timelines[s["ce_id"]])
    return out


def _mcnc(
    config: Config, ledger: Ledger, timelines: dict[str, q.CETimeline], requests: list[dict]
) -> tuple[list[dict], list[dict]]:
    rows = [
        {
            "sample_id": r["sample_id"],
            "ce_id": r["ce_id"],
            "timeline": _listing(r["background"]),
            "future": _listing(r["future_events"]),
            "true_event": r["true_event"],
        }
        for r in requests
    ]
    answers = {a["sample_id"]: a for a in _run(ledger, negatives_stage(), rows)}
    step = ledger.step("mcnc_check")
    checked = []
    for r in requests:
        a = answers[r["sample_id"]]
        if not a["parse_ok"]:
            continue
        problem = q.distractor_problem(r["true_event"], a["negatives"])
        if problem:
            ledger.drop(
                step,
                problem,
                unit="question",
                item_id=r["sample_id"],
                parent_id=r["ce_id"],
                detail=" | ".join(a["negatives"]),
            )
        else:
            ledger.keep(step)
            checked.append((r, list(a["negatives"])))
    step.finish()

    rows = [
        {"sample_id": r["sample_id"], "ce_id": r["ce_id"], "n": n, "event": text}
        for r, negatives in checked
        for n, text in enumerate(negatives)
    ]
    shapes = {
        (s["sample_id"], s["n"]): load(s["structured_json"]) if s["parse_ok"] else None
        for s in _run(ledger, structured_stage("negatives_structured"), rows, "event")
    }
    step = ledger.step("mcnc_leak_filter")
    mcnc, vqa = [], []
    for r, negatives in checked:
        events = timelines[r["ce_id"]].events
        future = [list(e.structured) if e.structured is not None else None for e in events[r["cut_idx"] :]]
        negative_shapes = [shapes[(r["sample_id"], n)] for n in range(len(negatives))]
        if any(not s for s in negative_shapes):
            ledger.drop(
                step,
                "negative_unverifiable",
                unit="question",
                item_id=r["sample_id"],
                parent_id=r["ce_id"],
                detail="no structured events",
            )
        elif any(really_happened(s, future) for s in negative_shapes):
            ledger.drop(
                step,
                "negative_happened",
                unit="question",
                item_id=r["sample_id"],
                parent_id=r["ce_id"],
                detail=" | ".join(negatives),
            )
        else:
            ledger.keep(step)
            question = q.build_mcnc(r, negatives, config.seed)
            mcnc.append(question)
            vqa.append(q.build_vqa(question, config.seed))
    step.metrics["vqa_yes"] = sum(v["gold_index"] == 0 for v in vqa)
    step.finish()
    return mcnc, vqa


def _mcac(config: Config, ledger: Ledger, requests: list[dict]) -> tuple[list[dict], list[dict]]:
    rows = [
        {
            "sample_id": r["sample_id"],
            "ce_id": r["ce_id"],
            "argument_name": r["argument_name"],
            "timeline": _listing(r["background"]),
            "target_event": r["target_event"],
            "other_events": _listing(r["other_events"]),
        }
        for r in requests
    ]
    answers = {a["sample_id"]: a for a in _run(ledger, mcac_stage(), rows)}
    step = ledger.step("mcac_check")
    aqa, mcac = [], []
    for r in requests:
        a = answers[r["sample_id"]]
        if not a["parse_ok"]:
            continue
        problem = q.distractor_problem(a["true_answer"], a["wrong_answers"])
        if problem:
            ledger.drop(
                step,
                problem,
                unit="question",
                item_id=r["sample_id"],
                parent_id=r["ce_id"],
                detail=" | ".join(a["wrong_answers"]),
            )
            continue
        ledger.keep(step)
        pair = q.build_argument_pair(r, a, config.seed)
        aqa.append(pair[0])
        mcac.append(pair[1])
    step.finish()
    return aqa, mcac
