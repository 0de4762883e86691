"""Forecasters and judges as LLM stages: one stage per (benchmark, task, setting) over all items.

A *setting* is a mode (``closed_book``, ``retrieval`` with a retriever, ``gold_context``) and an
answer format (``choice``: option probabilities from next-token log-probabilities;
``verbalized``: a generated JSON distribution; ``text``, ``scratchpad``, ``cot``: a free-text
answer, plain or after PROPHET's reasoning steps, read in the papers' answer forms, where no
answer is a refusal; ``generate``: ordering letters, event lists or
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

from pipelines.evaluate.context import Context, Corpus, RetrievalConfig, retriever_problem
from pipelines.llm.stage import LLMStage, StageRunner
from udfs.eval_items import YES_NO
from udfs.evaluate import answers, retrieval_metrics, within
from udfs.evaluate.scoring import CHOICE_TYPES, base_row, score_choice, score_order
from udfs.ids import stable_id, stable_seed
from udfs.llm_parsing import ParseError
from udfs.text import first_words

MODES = ("closed_book", "retrieval", "gold_context", "long_context")
# the ways an ordering item retrieves (TCELongBench S10): its choices as one query, or one each
ORDER_STRATEGIES = ("once", "one_by_one")
BY_DATE = "baseline:by_date"  # Acc_by_Date: one-by-one chunks' dates order the choices
# free-text formats: a plain answer, and PROPHET's ScratchPad (g) and chain-of-thought (h) reasoning
FREE_TEXT = ("text", "scratchpad", "cot")
ANSWER_FORMATS = ("choice", "verbalized", *FREE_TEXT)

EVENTS_SCHEMA = pa.schema([pa.field("events", pa.list_(pa.string()))])
ANSWER_SCHEMA = pa.schema([pa.field("answer", pa.string())])
ORDER_SCHEMA = pa.schema([pa.field("order_letters", pa.string())])
JSON_SCHEMA = pa.schema([pa.field("answer_json", pa.string())])
TEXT_SCHEMA = pa.schema([pa.field("answer_text", pa.string())])
VERDICT_SCHEMA = pa.schema([pa.field("verdict_yes", pa.bool_()), pa.field("verdict_label", pa.int32())])


def variables_of(row: dict[str, Any]) -> dict[str, Any]:
    return json.loads(row["vars_json"])


@dataclass(frozen=True)
class Setting:
    mode: str
    retriever: str | None
    answer_format: str
    one_by_one: bool = False  # an ordering item's choices retrieve one by one

    @property
    def name(self) -> str:
        mode = f"{self.mode}-{self.retriever}" if self.retriever else self.mode
        return f"{mode}{'-one_by_one' * self.one_by_one}.{self.answer_format}"

    @property
    def forecasting(self) -> bool:
        """False for reading comprehension (gold context) and for the CIL bounds, which pick
        articles knowing the outcome."""
        return self.mode != "gold_context" and self.retriever not in within.SCORED


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
    context_words: int  # the long-context mode's budget


def settings_for(
    kind: str,
    modes: tuple[str, ...],
    retrievers: tuple[str, ...],
    formats: tuple[str, ...],
    order_strategies: tuple[str, ...] = ("once",),
) -> list[Setting]:
    """Every setting an item type is evaluated in."""
    out = []
    for mode in modes:
        for retriever in retrievers if mode == "retrieval" else (None,):
            index = retriever is not None and retriever not in within.SCORED
            strategies = order_strategies if kind == "ordering" and index else ("once",)
            for answer in formats if kind in CHOICE_TYPES else ("generate",):
                out += [Setting(mode, retriever, answer, s == "one_by_one") for s in strategies]
    return out


def prompt_for(kind: str, task: str, setting: Setting, options: Options) -> str:
    if kind in CHOICE_TYPES:
        return f"evaluate.forecast_{setting.answer_format}"
    if kind == "ordering":
        return "evaluate.forecast_order"
    return "evaluate.forecast_answer" if task in options.open_answer_tasks else "evaluate.forecast_events"


PARSERS: dict[str, tuple[Callable[[str], dict[str, Any]] | None, pa.Schema]] = {
    "evaluate.forecast_choice": (None, pa.schema([])),
    "evaluate.forecast_verbalized": (answers.parse_verbalized_json, JSON_SCHEMA),
    **{f"evaluate.forecast_{fmt}": (answers.parse_free_text, TEXT_SCHEMA) for fmt in FREE_TEXT},
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
        pa.field("structured", pa.string()),  # the item's own answer form, when it has one
    ]
)


def forecast_stage(prompt_id: str, runs: int = 1, temperature: float = 1.0) -> LLMStage:
    """The stage of one forecasting prompt; it runs once over every (item, setting) that uses it.
    A generated answer is sampled ``runs`` times (distinct seeds, at ``temperature`` when more
    than once); next-token choice probabilities are deterministic and read once."""
    parser, schema = PARSERS[prompt_id]
    choice = prompt_id == "evaluate.forecast_choice"
    repeated = runs > 1 and not choice
    return LLMStage(
        prompt_id.split(".", 1)[1],
        prompt_id,
        parser=parser,
        parsed_schema=schema,
        variables=variables_of,
        options_column="option_labels" if choice else None,
        structured_column=None if choice else "structured",
        samples=runs if repeated else 1,
        sampling={"temperature": temperature} if repeated else {},
    )


def item_output(prompt_id: str, labels: list[str]) -> str | None:
    """The answer form that depends on the item: its letters' permutations for an ordering, its
    labels for a verbalized distribution (JSON; None: the prompt's own declaration)."""
    if prompt_id == "evaluate.forecast_order":
        return json.dumps(answers.order_output(len(labels)))
    if prompt_id == "evaluate.forecast_verbalized":
        return json.dumps(answers.verbalized_output(labels))
    return None


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
    item: dict[str, Any],
    setting: Setting,
    corpus: Corpus,
    rc: RetrievalConfig,
    options: Options,
    summaries: dict[str, str] | None = None,
) -> Request | str:
    """An item's prompt variables (and context) in one setting, or the reason it cannot be
    evaluated there."""
    context: Context | None = None
    problem = retriever_problem(setting.retriever, rc) if setting.retriever else None
    if problem:
        return problem
    if setting.retriever in within.SCORED and all(s is None for s in item.get("context_scores") or []):
        return "no_context_scores"
    if setting.one_by_one:
        context = corpus.retrieve_each(item, setting.retriever or "bm25", rc)
    elif setting.mode == "retrieval":
        context = corpus.retrieve(item, setting.retriever or "bm25", rc, summaries)
    elif setting.mode == "long_context":
        context = corpus.long_context(item, options.context_words, stable_seed(options.seed, item["item_id"]))
        if context is None:
            return "no_context_articles"
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
        "background": [first_words(x, options.background_words) for x in item.get("background") or []],
        "context": context.docs if context else [],
        "context_kind": {"retrieval": "retrieved", "long_context": "retrieved", "gold_context": "gold"}.get(
            setting.mode, ""
        ),
        "question": item.get("question") or "",
    }
    if kind != "open":
        variables["choices"] = shown
    if setting.answer_format in FREE_TEXT:
        variables["ask"] = answers.text_ask(kind)
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
    requests: list[Request], runner: StageRunner, runs: int = 1, temperature: float = 1.0
) -> list[list[dict[str, Any]]]:
    """One stage per prompt over all its requests; the output rows (one per run) of every
    request, in order."""
    answers_by_row: dict[int, list[dict[str, Any]]] = {}
    for prompt_id in sorted({r.prompt_id for r in requests}):
        rows = [
            {
                "row": n,
                "benchmark": r.item["benchmark"],
                "item_id": r.item["item_id"],
                "setting": r.setting.name,
                "vars_json": json.dumps(r.variables),
                "option_labels": r.labels,
                "structured": item_output(prompt_id, r.labels),
            }
            for n, r in enumerate(requests)
            if r.prompt_id == prompt_id
        ]
        stage = forecast_stage(prompt_id, runs, temperature)
        out = runner.run(stage, pa.Table.from_pylist(rows, schema=STAGE_ROWS))
        for answer in out.to_pylist():  # in input order, then sample order
            answers_by_row.setdefault(answer["row"], []).append(answer)
    return [answers_by_row[n] for n in range(len(requests))]


def _context_columns(request: Request) -> dict[str, Any]:
    """The context log of a result row, with the retriever measures of a retrieval setting."""
    context = request.context
    if context is None:
        return {
            "retrieved_ids": None,
            "retrieved_dates": None,
            "n_eligible": None,
            "newest_context_at": None,
            "k": None,
        }
    dated = [d for d in context.dates if d is not None]
    measures = retrieval_metrics.hits(request.item, context.ids, dated) if request.k is not None else {}
    return {
        "retrieved_ids": context.ids,
        "retrieved_dates": context.dates,
        "n_eligible": context.n_eligible,
        "newest_context_at": max(dated) if dated else None,
        "k": request.k,
        **measures,
    }


def by_date_row(request: Request, options: Options) -> dict[str, Any]:
    """The Acc_by_Date baseline's result for a one-by-one ordering request: the choices ordered
    by the dates of their chunks, no model involved."""
    assert request.context is not None and request.context.choice_dates is not None
    row = base_row(request.item, options.model_cutoff)
    row.update(
        model=BY_DATE,
        setting=request.setting.name,
        mode="retrieval",
        retriever=request.setting.retriever,
        forecasting=True,
        **_context_columns(request),
        **score_order(request.item, retrieval_metrics.order_by_dates(request.context.choice_dates)),
    )
    return row


def result_row(
    request: Request, answer: dict[str, Any], model: str, backend: str, options: Options, run: int = 0
) -> dict[str, Any]:
    """Score one answer (choice-type and ordering items; open items keep their answer in
    ``_answer`` / ``_events`` for the judges)."""
    item, setting = request.item, request.setting
    row = base_row(item, options.model_cutoff)
    row.update(
        model=model,
        run=run,
        backend=backend,
        setting=setting.name,
        mode=setting.mode,
        retriever=setting.retriever,
        answer_format=setting.answer_format,
        forecasting=setting.forecasting,
        permutation=request.permutation,
        option_mass=answer["option_mass"],
        prompt_id=answer["prompt_id"],
        prompt_version=answer["prompt_version"],
        response_hash=stable_id(answer["raw_text"]) if answer["raw_text"] is not None else None,
        **_context_columns(request),
    )
    reason = None if answer["parse_ok"] else answer["parse_error"]
    kind = item["type"]
    if kind in CHOICE_TYPES:
        probs = None
        if reason is None:
            try:
                probs = _choice_probs(answer, request)
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


def _choice_probs(answer: dict[str, Any], request: Request) -> list[float]:
    """Probabilities per original option from a choice, verbalized or free-text answer."""
    perm, labels, fmt = request.permutation, request.labels, request.setting.answer_format
    if fmt == "choice":
        presented = list(answer["option_probs"])
    elif fmt in FREE_TEXT:
        shown = [request.item["choices"][i] for i in perm] if perm is not None else []
        ask = answers.text_ask(request.item["type"])
        reasoned = fmt != "text"  # ScratchPad and CoT answer after their reasoning
        presented = answers.read_free_text(answer["answer_text"], ask, labels, shown, reasoned)
    else:
        presented = answers.parse_label_probabilities(answer["answer_json"], labels)
    return answers.to_original_order(presented, perm) if perm is not None else presented
