"""Forecasters and judges as LLM stages: one stage per (benchmark, task, setting) over all items.

A *setting* is a mode (``closed_book``, ``retrieval`` with a retriever, ``gold_context``) and an
answer format (``choice``: option probabilities from next-token log-probabilities;
``verbalized``: a generated JSON distribution; ``generate``: ordering letters, event lists or
short answers). The prompt text is the same in every mode except its context block.

- yes/no, MC and binary-probability items → a probability per option (binary: P(yes));
- ordering items → the letters of the options, earliest first;
- open items → a numbered list of events judged by LRAE (stage 1 against the gold list, stage 2
  against 5 retrieved passages for the stage-1 failures), or — for the short-answer tasks
  (``open_answer_tasks``, OpenForecast AQA) — one answer judged against the label.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines.evaluate.context import Context, Corpus, RetrievalConfig
from pipelines.llm.stage import LLMStage, StageRunner
from udfs import retrieval
from udfs.eval_items import YES_NO
from udfs.evaluate import answers
from udfs.evaluate.scoring import CHOICE_TYPES, base_row, score_choice, score_open, score_order
from udfs.ids import stable_id
from udfs.llm_parsing import ParseError
from udfs.timeutil import to_utc

MODES = ("closed_book", "retrieval", "gold_context")
ANSWER_FORMATS = ("choice", "verbalized")

EVENTS_SCHEMA = pa.schema([pa.field("events", pa.list_(pa.string()))])
ANSWER_SCHEMA = pa.schema([pa.field("answer", pa.string())])
ORDER_SCHEMA = pa.schema([pa.field("order_letters", pa.string())])
JSON_SCHEMA = pa.schema([pa.field("answer_json", pa.string())])
VERDICT_SCHEMA = pa.schema([pa.field("verdict_yes", pa.bool_()), pa.field("verdict_label", pa.int32())])


def _variables(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(row["vars_json"])


@dataclass(frozen=True)
class Setting:
    mode: str
    retriever: str | None
    answer_format: str

    @property
    def name(self) -> str:
        mode = f"{self.mode}-{self.retriever}" if self.retriever else self.mode
        return f"{mode}.{self.answer_format}"


@dataclass(frozen=True)
class Options:
    """The harness settings the forecasters and judges need."""

    seed: int
    background_words: int
    model_cutoff: dt.date | None
    open_answer_tasks: tuple[str, ...]
    lrae_evidence_k: int
    lrae_window_days: dict[str, int]
    dedup_threshold: float


def settings_for(
    kind: str, modes: tuple[str, ...], retrievers: tuple[str, ...], formats: tuple[str, ...]
) -> list[Setting]:
    """Every setting an item type is evaluated in."""
    out = []
    for mode in modes:
        for retriever in retrievers if mode == "retrieval" else (None,):
            for answer in formats if kind in CHOICE_TYPES else ("generate",):
                out.append(Setting(mode, retriever, answer))
    return out


def prompt_for(kind: str, task: str, setting: Setting, options: Options) -> str:
    if kind in CHOICE_TYPES:
        return (
            "evaluate.forecast_choice"
            if setting.answer_format == "choice"
            else "evaluate.forecast_verbalized"
        )
    if kind == "ordering":
        return "evaluate.forecast_order"
    return "evaluate.forecast_answer" if task in options.open_answer_tasks else "evaluate.forecast_events"


PARSERS: dict[str, tuple[Callable[[str], dict[str, Any]] | None, pa.Schema]] = {
    "evaluate.forecast_choice": (None, pa.schema([])),
    "evaluate.forecast_verbalized": (answers.parse_verbalized_json, JSON_SCHEMA),
    "evaluate.forecast_order": (answers.parse_order_columns, ORDER_SCHEMA),
    "evaluate.forecast_events": (answers.parse_continued_list, EVENTS_SCHEMA),
    "evaluate.forecast_answer": (answers.parse_short_answer, ANSWER_SCHEMA),
}
STAGE_ROWS = pa.schema(
    [
        pa.field("row", pa.int64()),
        pa.field("benchmark", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("vars_json", pa.string()),
        pa.field("option_labels", pa.list_(pa.string())),
    ]
)


def forecast_stage(prompt_id: str, max_new_tokens: int | None = None) -> LLMStage:
    """The stage of one forecasting prompt; it runs once over every (item, setting) that uses it.
    ``max_new_tokens`` caps the prompt's own generation budget (CPU runs)."""
    parser, schema = PARSERS[prompt_id]
    choice = prompt_id == "evaluate.forecast_choice"
    budget = LLMStage(prompt_id.split(".", 1)[1], prompt_id).prompt.sampling.get("max_tokens")
    cap = (
        {}
        if choice or max_new_tokens is None
        else {"max_tokens": min(max_new_tokens, budget or max_new_tokens)}
    )
    return LLMStage(
        prompt_id.split(".", 1)[1],
        prompt_id,
        parser=parser,
        parsed_schema=schema,
        variables=_variables,
        options_column="option_labels" if choice else None,
        sampling=cap,
    )


@dataclass
class Request:
    """One item in one setting: what its prompt shows and what scoring needs."""

    item: dict[str, Any]
    setting: Setting
    prompt_id: str
    variables: dict[str, Any]
    labels: list[str]
    context: Context | None
    permutation: list[int] | None
    k: int | None


def prepare(
    item: dict[str, Any], setting: Setting, corpus: Corpus, rc: RetrievalConfig, options: Options
) -> Request | str:
    """An item's prompt variables (and context) in one setting, or the reason it cannot be
    evaluated there."""
    context: Context | None = None
    if setting.mode == "retrieval":
        context = corpus.retrieve(item, setting.retriever or "bm25", rc)
    elif setting.mode == "gold_context":
        context = corpus.gold(item, rc.doc_words)
        if context is None:
            return "no_gold_article_in_corpus"
    kind = item["type"]
    perm = None
    labels: list[str] = []
    shown: list[dict[str, str]] = []
    if kind == "mc":
        perm = answers.shuffle_permutation(item["item_id"], len(item["choices"]), options.seed)
        labels = answers.option_labels(len(perm))
        shown = [{"label": labels[j], "text": item["choices"][perm[j]]} for j in range(len(perm))]
    elif kind == "ordering":
        labels = answers.option_labels(len(item["choices"]))
        shown = [{"label": labels[j], "text": c} for j, c in enumerate(item["choices"])]
    elif kind in CHOICE_TYPES:  # yes/no and binary: the options are Yes and No
        labels = list(YES_NO)
    variables: dict[str, Any] = {
        "background": [
            retrieval.first_words(x, options.background_words) for x in item.get("background") or []
        ],
        "context": context.docs if context else [],
        "context_kind": {"retrieval": "retrieved", "gold_context": "gold"}.get(setting.mode, ""),
        "question": item.get("question") or "",
    }
    if kind != "open":
        variables["choices"] = shown
    return Request(
        item=item,
        setting=setting,
        prompt_id=prompt_for(kind, item["task"], setting, options),
        variables=variables,
        labels=labels,
        context=context,
        permutation=perm,
        k=rc.k if setting.mode == "retrieval" else None,
    )


def run_forecasts(
    requests: list[Request], runner: StageRunner, max_new_tokens: int | None = None
) -> list[dict[str, Any]]:
    """One stage per prompt over all its requests; the output row of every request, in order."""
    answers_by_row: dict[int, dict[str, Any]] = {}
    for prompt_id in sorted({r.prompt_id for r in requests}):
        rows = [
            {
                "row": n,
                "benchmark": r.item["benchmark"],
                "item_id": r.item["item_id"],
                "setting": r.setting.name,
                "vars_json": json.dumps(r.variables),
                "option_labels": r.labels,
            }
            for n, r in enumerate(requests)
            if r.prompt_id == prompt_id
        ]
        out = runner.run(
            forecast_stage(prompt_id, max_new_tokens), pa.Table.from_pylist(rows, schema=STAGE_ROWS)
        )
        answers_by_row.update({a["row"]: a for a in out.to_pylist()})
    return [answers_by_row[n] for n in range(len(requests))]


def _context_columns(context: Context | None, k: int | None) -> dict[str, Any]:
    if context is None:
        return {
            "retrieved_ids": None,
            "retrieved_dates": None,
            "n_eligible": None,
            "newest_context_at": None,
            "k": None,
        }
    dated = [d for d in context.dates if d is not None]
    return {
        "retrieved_ids": context.ids,
        "retrieved_dates": context.dates,
        "n_eligible": context.n_eligible,
        "newest_context_at": max(dated) if dated else None,
        "k": k,
    }


def result_row(
    request: Request, answer: dict[str, Any], model: str, backend: str, options: Options
) -> dict[str, Any]:
    """Score one answer (choice-type and ordering items; open items keep their answer in
    ``_answer`` / ``_events`` for the judges)."""
    item, setting = request.item, request.setting
    row = base_row(item, options.model_cutoff)
    row.update(
        model=model,
        backend=backend,
        setting=setting.name,
        mode=setting.mode,
        retriever=setting.retriever,
        answer_format=setting.answer_format,
        forecasting=setting.mode != "gold_context",
        permutation=request.permutation,
        option_mass=answer["option_mass"],
        prompt_id=answer["prompt_id"],
        prompt_version=answer["prompt_version"],
        response_hash=stable_id(answer["raw_text"]) if answer["raw_text"] is not None else None,
        **_context_columns(request.context, request.k),
    )
    reason = None if answer["parse_ok"] else answer["parse_error"]
    kind = item["type"]
    if kind in CHOICE_TYPES:
        probs = None
        if reason is None:
            try:
                probs = _choice_probs(answer, setting, request.permutation)
            except ParseError as exc:
                reason = f"parse: {exc}"
        row.update(score_choice(item, probs))
    elif kind == "ordering":
        order = None
        if reason is None:
            try:
                order = answers.order_from_letters(answer["order_letters"], len(item["choices"]))
            except ParseError as exc:
                reason = f"parse: {exc}"
        row.update(score_order(item, order))
    else:
        row["_answer"] = answer.get("answer") if reason is None else None
        row["_events"] = answer.get("events") if reason is None else None
    row.update(refusal=reason is not None, refusal_reason=reason)
    return row


def _choice_probs(answer: dict[str, Any], setting: Setting, perm: list[int] | None) -> list[float]:
    """Probabilities per original option from a choice or verbalized answer."""
    if setting.answer_format == "choice":
        presented = list(answer["option_probs"])
    else:
        labels = answers.option_labels(len(perm)) if perm is not None else list(YES_NO)
        presented = answers.parse_label_probabilities(answer["answer_json"], labels)
    return answers.to_original_order(presented, perm) if perm is not None else presented


# ----------------------------------------------------------------------------- open items
def judge_open(
    rows: list[dict[str, Any]],
    items: dict[tuple[str, str], dict[str, Any]],
    judge: StageRunner,
    evidence: Callable[[], retrieval.EvidenceIndex],
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
        out = judge.run(LLMStage("judge_answer", "evaluate.judge_answer", variables=_variables), table)
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
    return unreadable


def _judge_lists(
    rows: list[dict[str, Any]],
    items: dict[tuple[str, str], dict[str, Any]],
    judge: StageRunner,
    evidence: Callable[[], retrieval.EvidenceIndex],
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
            variables=_variables,
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
        queries = embed([predictions[n][j] for n, j in failures])
        by_window: dict[tuple, list[int]] = {}
        for q, (n, _) in enumerate(failures):
            window = _evidence_window(_item(items, rows[n]), rows[n]["task"], options)
            by_window.setdefault(window, []).append(q)
        passages: dict[int, list[str]] = {}
        for (start, end), qs in by_window.items():
            found = index.search_vectors(queries[qs], start, end, options.lrae_evidence_k)
            for q, positions in zip(qs, found, strict=True):
                passages[q] = [index.texts[i] for i in positions]
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
            out = judge.run(LLMStage("lrae2", "evaluate.judge_evidence", variables=_variables), table)
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
