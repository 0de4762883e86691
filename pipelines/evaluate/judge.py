"""Judges of open answers as LLM stages: LRAE for event lists (stage 1 against the gold list,
stage 2 against retrieved passages for the stage-1 failures) and the answer judge for short
answers (which also get BLEU and METEOR against their gold answers, TCELongBench S10), each one
stage per judge prompt over every result row that needs it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from pipelines.evaluate.forecast import VERDICT_SCHEMA, Options, variables_of
from pipelines.index.engine import ArticleIndex
from pipelines.llm.stage import LLMStage, StageRunner
from udfs.evaluate import answers, overlap
from udfs.evaluate.scoring import score_open
from udfs.timeutil import to_utc


def judge_open(
    rows: list[dict[str, Any]],
    items: dict[tuple[str, str], dict[str, Any]],
    judge: StageRunner,
    evidence: Callable[[], ArticleIndex],
    options: Options,
) -> dict[str, int]:
    """Score the open items' result rows in place — LRAE for event lists, the answer judge for
    short answers — with one stage per judge prompt over all of them. Returns counts of judge
    replies that could not be read (counted as No) and of stage-2 checks without evidence."""
    short = [r for r in rows if r["task"] in options.open_answer_tasks]
    lists = [r for r in rows if r["task"] not in options.open_answer_tasks]
    counts = {"judge_unreadable": 0, "stage2_without_evidence": 0}
    if short:
        counts["judge_unreadable"] += _judge_answers(short, items, judge)
    if lists:
        unreadable, no_evidence = _judge_lists(lists, items, judge, evidence, options)
        counts["judge_unreadable"] += unreadable
        counts["stage2_without_evidence"] += no_evidence
    return counts


def _item(items: dict[tuple[str, str], dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    return items[(row["benchmark"], row["item_id"])]


def _judge_answers(
    rows: list[dict[str, Any]], items: dict[tuple[str, str], dict[str, Any]], judge: StageRunner
) -> int:
    todo = [r for r in rows if r["_answer"]]
    table = pa.Table.from_pylist(
        [
            {
                "row": n,
                "vars_json": json.dumps(
                    {
                        "question": _item(items, r)["question"] or "",
                        "label": " / ".join(_item(items, r)["gold_texts"]),
                        "prediction": r["_answer"],
                    }
                ),
            }
            for n, r in enumerate(todo)
        ],
        schema=pa.schema([pa.field("row", pa.int64()), pa.field("vars_json", pa.string())]),
    )
    verdicts: dict[int, bool] = {}
    unreadable = 0
    if todo:
        out = judge.run(LLMStage("judge_answer", "evaluate.judge_answer", variables=variables_of), table)
        for r in out.to_pylist():
            if r["parse_ok"]:
                verdicts[r["row"]] = r["option_probs"][0] >= r["option_probs"][1]
            else:
                unreadable += 1
    for n, r in enumerate(todo):
        r["correct"] = float(verdicts.get(n, False))
        r["open_predictions"] = [r["_answer"]]
    for r in rows:
        if r.get("correct") is None:
            r["correct"] = 0.0
        gold = _item(items, r)["gold_texts"]
        r["bleu"] = overlap.bleu(r["_answer"] or "", gold)
        r["meteor"] = overlap.meteor(r["_answer"] or "", gold)
    return unreadable


def _judge_lists(
    rows: list[dict[str, Any]],
    items: dict[tuple[str, str], dict[str, Any]],
    judge: StageRunner,
    evidence: Callable[[], ArticleIndex],
    options: Options,
) -> tuple[int, int]:
    from udfs.embeddings import embed

    predictions: list[list[str]] = []
    for r in rows:
        events = r["_events"] or []
        if events:
            keep = answers.dedup_by_similarity(embed(events), options.dedup_threshold)
            events = [events[i] for i in keep]
        predictions.append(events)
    pairs = [(n, j) for n, events in enumerate(predictions) for j in range(len(events))]
    stage1: dict[tuple[int, int], int | None] = {}
    unreadable = 0
    if pairs:
        table = pa.Table.from_pylist(
            [
                {
                    "pair": p,
                    "vars_json": json.dumps(
                        {"labels": list(_item(items, rows[n])["gold_texts"]), "prediction": predictions[n][j]}
                    ),
                }
                for p, (n, j) in enumerate(pairs)
            ]
        )
        stage = LLMStage(
            "lrae1",
            "evaluate.judge_match",
            parser=answers.parse_match_verdict,
            parsed_schema=VERDICT_SCHEMA,
            variables=variables_of,
        )
        for r in judge.run(stage, table).to_pylist():
            n, j = pairs[r["pair"]]
            unreadable += not r["parse_ok"]
            n_labels = len(_item(items, rows[n])["gold_texts"])
            stage1[(n, j)] = (
                answers.matched_label(r["verdict_yes"], r["verdict_label"], n_labels)
                if r["parse_ok"]
                else None
            )
    failures = [p for p in pairs if stage1[p] is None]
    stage2: dict[tuple[int, int], bool] = dict.fromkeys(failures, False)
    no_evidence = 0
    if failures:
        index = evidence()
        queries = [predictions[n][j] for n, j in failures]
        by_window: dict[tuple, list[int]] = {}
        for q, (n, _) in enumerate(failures):
            window = _evidence_window(_item(items, rows[n]), rows[n]["task"], options)
            by_window.setdefault(window, []).append(q)
        passages: dict[int, list[str]] = {}
        for (start, end), qs in by_window.items():
            for q in qs:
                found = index.nearest(queries[q], start, end, options.lrae_evidence_k)
                passages[q] = [h.text for h in found]
        todo = [q for q in range(len(failures)) if passages[q]]
        no_evidence = len(failures) - len(todo)
        if todo:
            table = pa.Table.from_pylist(
                [
                    {
                        "q": q,
                        "vars_json": json.dumps(
                            {
                                "evidence": passages[q],
                                "prediction": predictions[failures[q][0]][failures[q][1]],
                            }
                        ),
                    }
                    for q in todo
                ]
            )
            out = judge.run(LLMStage("lrae2", "evaluate.judge_evidence", variables=variables_of), table)
            for r in out.to_pylist():
                unreadable += not r["parse_ok"]
                stage2[failures[r["q"]]] = bool(
                    r["parse_ok"] and r["option_probs"][0] >= r["option_probs"][1]
                )
    for n, r in enumerate(rows):
        events = predictions[n]
        r.update(
            score_open(
                _item(items, r),
                events,
                [stage1[(n, j)] for j in range(len(events))],
                [stage2.get((n, j), False) for j in range(len(events))],
            )
        )
    return unreadable, no_evidence


def _evidence_window(
    item: dict[str, Any], task: str, options: Options
) -> tuple[dt.datetime, dt.datetime | None]:
    """Where LRAE's stage-2 passages may come from: from the item's cutoff on, and for tasks with
    a window (STF: 3 days) through the end of that many days later (``[Tk, Tk + 3 days]``)."""
    start = to_utc(item["t_cut"])
    days = options.lrae_window_days.get(task)
    if days is None:
        return start, None
    return start, start + dt.timedelta(days=days + 1, microseconds=-1)  # through the last day
