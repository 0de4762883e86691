"""Evaluate forecasters on every benchmark under a root, and write the leaderboard.

    python -m pipelines.evaluate --root out                                  # all benchmarks found
    python -m pipelines.evaluate --root out --forecastbench Q.json R.json --limit 20 --k 3 --doc-words 80
    python -m pipelines.evaluate --root s3://bucket/augury --backend vllm --model meta-llama/... \\
        --modes closed_book,retrieval --retrievers bm25,dense,hybrid --model-cutoff 2023-12-01

Inputs: every ``<root>/benchmarks/*/eval_items`` (discovered), ForecastBench question/resolution
pairs, plain question files and ForecastQA JSON files. For each (benchmark, task, setting) one
LLM stage runs over all items; answers become per-item results, then the leaderboard (with
uniform and majority baselines) and the drift analysis are rebuilt from every result under
``<root>/eval/``. See docs/evaluate.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import ray

from pipelines import builders
from pipelines.benchmarks import plain
from pipelines.evaluate import report
from pipelines.evaluate.context import (
    IMPORTED_RETRIEVAL,
    RETRIEVERS,
    Corpus,
    RetrievalConfig,
    retrieval_config,
    retriever_problem,
)
from pipelines.evaluate.forecast import (
    ANSWER_FORMATS,
    BY_DATE,
    MODES,
    ORDER_STRATEGIES,
    Options,
    Request,
    Setting,
    by_date_row,
    prepare,
    result_row,
    run_forecasts,
    settings_for,
)
from pipelines.evaluate.inputs import load_items, select
from pipelines.evaluate.judge import judge_open
from pipelines.evaluate.summaries import summarize
from pipelines.index.engine import TABLE, passage_table, require_index
from pipelines.llm.config import LLMConfig
from pipelines.llm.ray_env import ensure_ray
from pipelines.llm.stage import StagePlan, StageRunner
from pipelines.options import RunOptions
from udfs import storage
from udfs.cli import InputError, option
from udfs.layout import Layout
from udfs.report import RunSummary, combined_table
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.evaluate")


def paper_retrieval() -> dict[str, RetrievalConfig]:
    """The papers' retrieval settings per benchmark: the imported benchmarks' and the ones every
    registered builder declares."""
    return {**IMPORTED_RETRIEVAL, **builders.retrieval()}


@dataclass(frozen=True)
class Config(RunOptions):
    """What to evaluate and how. ``limit``: at most N items per (benchmark, task), a seeded sample."""

    judge_llm_config: str | None = option(
        None, help="YAML LLMConfig of the LRAE / AQA judge [default: the forecaster's model]"
    )
    benchmarks: tuple[str, ...] | None = option(None, help="discovered benchmarks to evaluate [default: all]")
    forecastbench: tuple[tuple[str, str], ...] = option(
        (), help="a ForecastBench question set and its resolution set (repeatable)", metavar="FILE"
    )
    question_files: tuple[str, ...] = option(
        (), help="a udfs.questions JSONL/Parquet file (repeatable)", flag="--questions", repeat=True
    )
    forecastqa: tuple[str, ...] = option((), help="a ForecastQA public JSON file (repeatable)", repeat=True)
    forecastqa_split: str | None = option(
        None,
        help="split of ForecastQA files not named forecastQA_<split>_public.json",
        choices=("train", "dev", "test"),
    )
    splits: tuple[str, ...] | None = option(None, help="splits to evaluate [default: all]")
    modes: tuple[str, ...] = option(
        ("closed_book", "retrieval", "gold_context"), help="forecaster modes", choices=MODES
    )
    order_strategies: tuple[str, ...] = option(
        ORDER_STRATEGIES,
        help="how ordering items retrieve: their choices as one query, or one by one",
        choices=ORDER_STRATEGIES,
    )
    runs: int = option(
        1,
        help="times each generated answer is sampled, with distinct seeds; the leaderboard gives the mean "
        "and std over runs (PROPHET §5 runs every setting twice)",
        min=1,
    )
    run_temperature: float = option(
        1.0, help="sampling temperature of generated answers when --runs > 1", min=0
    )
    context_words: int = option(
        6000, help="word budget of the long_context mode (whole context articles, trimmed)", min=1
    )
    retrievers: tuple[str, ...] = option(
        ("bm25",), help="retrievers of the retrieval mode", choices=RETRIEVERS
    )
    answer_formats: tuple[str, ...] = option(
        ("choice",), help="answer formats of yes/no, MC and binary items", choices=ANSWER_FORMATS
    )
    k: int | None = option(None, help="documents per question, every benchmark [default: its paper's]", min=1)
    doc_words: int | None = option(None, help="words shown per document, every benchmark", min=1)
    chunk_words: int | None = option(
        None, help="search the index's passages of N words (index --passage-words N), every benchmark", min=1
    )
    background_words: int = option(200, help="each background line cut to its first N words", min=1)
    model_cutoff: dt.date | None = option(None, help="the forecaster's knowledge cutoff (R3)")
    retrieval: dict[str, RetrievalConfig] = field(default_factory=paper_retrieval)
    # open tasks answered in a few words (answer judge, BLEU, METEOR): OpenForecast AQA, TLB open forecasts
    open_answer_tasks: tuple[str, ...] = ("aqa", "forecast_open")
    lrae_evidence_k: int = 5
    lrae_chunk_words: int = 100  # stage-2 passages: the index's passage table of this size
    lrae_window_days: dict[str, int] = field(default_factory=lambda: {"stf": 3})
    dedup_threshold: float = 0.95  # predicted events more similar than this to an earlier one are dropped

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("modes", "retrievers", "answer_formats"):
            if not getattr(self, name):
                raise ValueError(f"--{name.replace('_', '-')} needs at least one value")

    @property
    def retrieval_override(self) -> dict[str, Any]:
        """RetrievalConfig fields set for every benchmark."""
        fields = {"k": self.k, "doc_words": self.doc_words, "chunk_words": self.chunk_words}
        return {name: value for name, value in fields.items() if value is not None}

    @property
    def judge_llm(self) -> LLMConfig:
        return LLMConfig.from_yaml(self.judge_llm_config) if self.judge_llm_config else self.llm

    def check_inputs(self) -> None:
        """The root, the question files and (for modes that read articles) the corpus."""
        layout = Layout(self.root)
        layout.check_root()
        files = [*(f for pair in self.forecastbench for f in pair), *self.question_files, *self.forecastqa]
        files += [self.judge_llm_config] if self.judge_llm_config else []
        missing = [f for f in files if not storage.exists(f)]
        if missing:
            raise InputError(f"no such input file: {', '.join(missing)}")
        if {"retrieval", "gold_context"} & set(self.modes):
            layout.require(ARTICLES)
            require_index(self.root)


@dataclass
class Outcome:
    items: int
    results: list[dict[str, Any]]
    reports: dict[str, Any]
    summaries: list[RunSummary]


def _prepare_group(
    root: str,
    options: Options,
    group: list[dict[str, Any]],
    setting: Setting,
    rc: RetrievalConfig,
    summaries: dict[str, str] | None,
) -> list[Request | str]:
    """The requests (or reasons) of one (benchmark, task, setting), in a Ray worker: the index's
    searches and their working memory, which grow with the corpus, stay out of the driver."""
    corpus = Corpus(root)
    return [prepare(item, setting, corpus, rc, options, summaries) for item in group]


def _article_summaries(
    config: Config, groups: dict[tuple[str, str], list[dict[str, Any]]], summarizer: StageRunner
) -> dict[str, ray.ObjectRef]:
    """Per benchmark whose retrieval shows summaries, the summaries of its items' article sets
    (one stage over all of them), put in Ray's object store once for every setting's task."""
    wanted: dict[str, set[str]] = defaultdict(set)
    words: dict[str, int] = {}
    for (benchmark, _), group in groups.items():
        rc = retrieval_config(benchmark, config.retrieval, config.retrieval_override)
        if rc.summaries and "retrieval" in config.modes:
            words[benchmark] = rc.doc_words
            for item in group:
                wanted[benchmark].update(item.get("context_article_ids") or [])
    if not wanted:
        return {}
    ids = set().union(*wanted.values())
    found = summarize(config.root, ids, summarizer, max(words.values()))
    if config.plan and len(found) < len(ids):
        print(
            f"plan: {len(ids) - len(found)} article summaries are not computed yet; the forecast prompts "
            f"of {', '.join(sorted(wanted))} are estimated here with the articles' text instead"
        )
    return {b: ray.put({a: found[a] for a in ids if a in found}) for b, ids in wanted.items()}


def _check_searches(config: Config, corpus: Corpus, groups: dict[tuple[str, str], list]) -> None:
    """Stop the run before any stage when a benchmark's index table cannot answer a retriever
    asked for: a dense or hybrid search of passages indexed for full text only (the index job's
    ``--passage-vectors``), or a passage table not built at all."""
    if "retrieval" not in config.modes:
        return
    for benchmark in sorted({b for b, _ in groups}):
        rc = retrieval_config(benchmark, config.retrieval, config.retrieval_override)
        searching = [r for r in config.retrievers if retriever_problem(r, rc) is None]
        if not searching:  # every retriever's items end as rejected rows with the reason
            continue
        table = corpus.table(passage_table(rc.chunk_words) if rc.chunk_words else TABLE)
        for retriever in sorted({"dense", "hybrid"} & set(searching)):
            table.check(retriever)


def run(config: Config) -> Outcome:
    """Evaluate every selected item in every setting; write results and reports."""
    started = time.time()
    config.check_inputs()
    items, read_summary = load_items(
        config.root,
        config.benchmarks,
        config.forecastbench,
        config.question_files,
        config.forecastqa,
        config.forecastqa_split,
    )
    items, select_summary = select(items, config.splits, config.limit, config.seed)
    summaries = [read_summary.finish(), select_summary.finish()]
    if not items:
        raise ValueError(f"no items to evaluate under {config.root} (and no item files given)")
    corpus = Corpus.load(config.root)
    options = Options(
        seed=config.seed,
        background_words=config.background_words,
        model_cutoff=config.model_cutoff,
        open_answer_tasks=config.open_answer_tasks,
        lrae_evidence_k=config.lrae_evidence_k,
        lrae_window_days=dict(config.lrae_window_days),
        dedup_threshold=config.dedup_threshold,
        context_words=config.context_words,
    )
    evidence = functools.partial(corpus.table, passage_table(config.lrae_chunk_words))
    judge_llm = config.judge_llm
    model = config.llm.model
    base = f"eval/_runs/{report.model_slug(model)}"

    def stage_runner(namespace: str, llm: LLMConfig) -> StageRunner:
        return StageRunner(config.root, namespace, llm, force=config.force, plan_only=config.plan)

    runner = stage_runner(base, config.llm)
    judge = stage_runner(f"{base}/judge-{report.model_slug(judge_llm.model)}", judge_llm)
    # summaries are the judge model's, shared by every forecaster
    summarizer = stage_runner(f"eval/_summaries/{report.model_slug(judge_llm.model)}", judge_llm)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        groups[(item["benchmark"], item["task"])].append(item)
    _check_searches(config, corpus, groups)
    requests: list[Request] = []
    rejected: dict[str, list[dict[str, str]]] = defaultdict(list)
    ensure_ray(config.llm)
    article_summaries = _article_summaries(config, groups, summarizer)
    prepare_group = ray.remote(_prepare_group)
    preparing: list[tuple[str, list[dict[str, Any]], Setting, RunSummary, ray.ObjectRef]] = []
    setting_summaries: dict[tuple[str, str, str], RunSummary] = {}
    for (benchmark, task), group in sorted(groups.items()):
        kinds = {i["type"] for i in group}
        if len(kinds) != 1:
            raise ValueError(f"{benchmark}/{task}: items of several types {sorted(kinds)}")
        rc = retrieval_config(benchmark, config.retrieval, config.retrieval_override)
        kind = kinds.pop()
        for setting in settings_for(
            kind, config.modes, config.retrievers, config.answer_formats, config.order_strategies
        ):
            summary = RunSummary(name=f"evaluate/{benchmark}/{task}.{setting.name}", rows_read=len(group))
            setting_summaries[(benchmark, task, setting.name)] = summary
            preparing.append(
                (
                    benchmark,
                    group,
                    setting,
                    summary,
                    prepare_group.remote(
                        config.root, options, group, setting, rc, article_summaries.get(benchmark)
                    ),
                )
            )
    for benchmark, group, setting, summary, ref in preparing:
        for item, prepared in zip(group, ray.get(ref), strict=True):
            if isinstance(prepared, str):
                summary.reject(prepared)
                rejected[benchmark].append(
                    {
                        "item_id": item["item_id"],
                        "setting": setting.name,
                        "split": item["split"],
                        "reason": prepared,
                    }
                )
            else:
                requests.append(prepared)
        summary.finish()  # its time is the preparation (retrieval) time
    outputs = run_forecasts(requests, runner, config.runs, config.run_temperature)
    if config.plan:
        print(StagePlan.table(summarizer.plans + runner.plans))
        return Outcome(len(items), [], {}, [*summaries, *summarizer.summaries, *runner.summaries])
    scored = [
        (r, result_row(r, a, model, config.llm.backend, options, run))
        for r, answers in zip(requests, outputs, strict=True)
        for run, a in enumerate(answers)
    ]
    rows = [row for _, row in scored]
    open_rows = [row for row in rows if row["type"] == "open"]
    judged = judge_open(
        open_rows, {(i["benchmark"], i["item_id"]): i for i in items}, judge, evidence, options
    )
    retrieval_log: dict[tuple[str, str, str], dict[str, Any]] = {}
    for request, row in scored:
        row.pop("_answer", None)
        row.pop("_events", None)
        summary = setting_summaries[(row["benchmark"], row["task"], row["setting"])]
        summary.rows_written += 1
        summary.metrics["refusals"] = summary.metrics.get("refusals", 0) + row["refusal"]
        if request.k is not None and row["run"] == 0:  # per item, not per repeated answer
            entry = retrieval_log.setdefault(
                (row["benchmark"], row["task"], row["setting"]),
                {
                    "benchmark": row["benchmark"],
                    "task": row["task"],
                    "setting": row["setting"],
                    "k": request.k,
                    "items": 0,
                    "fewer_than_k": 0,
                },
            )
            entry["items"] += 1
            entry["fewer_than_k"] += len(row["retrieved_ids"]) < request.k
    for entry in retrieval_log.values():
        entry["share_fewer_than_k"] = entry["fewer_than_k"] / entry["items"]
    by_benchmark: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_benchmark[row["benchmark"]].append(row)
    by_date: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in requests:
        if request.setting.one_by_one:
            by_date[request.item["benchmark"]].append(by_date_row(request, options))
    for benchmark in sorted(set(by_benchmark) | set(rejected)):
        ran = {(r["setting"], r["split"]) for r in (*by_benchmark[benchmark], *rejected[benchmark])}
        report.write_results(config.root, benchmark, model, by_benchmark[benchmark], ran)
        report.write_rejected(config.root, benchmark, model, rejected[benchmark], ran)
        if by_date[benchmark]:
            report.write_results(config.root, benchmark, BY_DATE, by_date[benchmark])
    reports = report.write_reports(config.root, report.read_all_results(config.root), config.seed)
    all_summaries = [
        *summaries,
        *setting_summaries.values(),
        *summarizer.summaries,
        *runner.summaries,
        *judge.summaries,
    ]
    storage.write_json(
        report.eval_uri(config.root, "summary.json"),
        {
            "model": model,
            "backend": config.llm.backend,
            "judge_model": judge_llm.model,
            "items": len(items),
            "results_written": len(rows),
            "judges": judged,
            "retrieval": list(retrieval_log.values()),
            "prompt_versions": {**summarizer.prompts_used, **runner.prompts_used, **judge.prompts_used},
            "summaries": [s.to_dict() for s in all_summaries],
            "config": plain(config),
            "seconds": round(time.time() - started, 1),
        },
    )
    print(combined_table(all_summaries, f"evaluate {model} on {config.llm.backend}"))
    print(f"leaderboard: {report.eval_uri(config.root, 'leaderboard.md')}")
    return Outcome(len(items), rows, reports, all_summaries)
