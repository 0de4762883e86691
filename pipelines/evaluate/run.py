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

import argparse
import dataclasses
import datetime as dt
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pipelines.evaluate import report
from pipelines.evaluate.context import PAPER_RETRIEVAL, RETRIEVERS, Corpus, RetrievalConfig, retrieval_config
from pipelines.evaluate.forecast import (
    ANSWER_FORMATS,
    MODES,
    Options,
    Request,
    judge_open,
    prepare,
    result_row,
    run_forecasts,
    settings_for,
)
from pipelines.evaluate.inputs import load_items, select
from pipelines.llm.config import LLMConfig, add_llm_args, from_args
from pipelines.llm.stage import StageRunner
from pipelines.llm_smoke import plan_table
from udfs import retrieval, storage
from udfs.report import RunSummary, combined_table

log = logging.getLogger("augury.evaluate")


@dataclass(frozen=True)
class Config:
    root: str
    llm: LLMConfig = field(default_factory=LLMConfig)
    judge_llm: LLMConfig | None = None  # the LRAE / AQA judge (default: the forecaster's model)
    benchmarks: tuple[str, ...] | None = None  # discovered benchmarks to evaluate (None: all)
    forecastbench: tuple[tuple[str, str], ...] = ()  # (question set, resolution set) pairs
    question_files: tuple[str, ...] = ()  # udfs.questions JSONL/Parquet files
    forecastqa: tuple[str, ...] = ()  # ForecastQA public JSON files
    forecastqa_split: str | None = None  # for ForecastQA files not named forecastQA_<split>_public.json
    splits: tuple[str, ...] | None = None  # None: every split
    limit: int | None = None  # at most this many items per (benchmark, task), a seeded sample
    modes: tuple[str, ...] = MODES
    retrievers: tuple[str, ...] = ("bm25",)
    answer_formats: tuple[str, ...] = ("choice",)  # for yes/no, MC and binary items
    retrieval: dict[str, RetrievalConfig] = field(default_factory=lambda: dict(PAPER_RETRIEVAL))
    retrieval_override: dict[str, Any] = field(default_factory=dict)  # RetrievalConfig fields for all
    background_words: int = 200  # each background line cut to its first N words
    model_cutoff: dt.date | None = None  # the forecaster's knowledge cutoff (R3)
    open_answer_tasks: tuple[str, ...] = ("aqa",)  # open tasks answered in a few words (AQA judge)
    lrae_evidence_k: int = 5
    lrae_chunk_words: int = 100  # stage-2 passages: paragraphs, split to at most N words
    lrae_window_days: dict[str, int] = field(default_factory=lambda: {"stf": 3})
    dedup_threshold: float = 0.95  # predicted events more similar than this to an earlier one are dropped
    max_new_tokens: int | None = None  # cap on the forecasters' generated tokens (CPU runs)
    seed: int = 0
    force: bool = False
    plan: bool = False

    def __post_init__(self) -> None:
        if set(self.modes) - set(MODES) or not self.modes:
            raise ValueError(f"modes must be among {MODES}")
        if set(self.retrievers) - set(RETRIEVERS) or not self.retrievers:
            raise ValueError(f"retrievers must be among {RETRIEVERS}")
        if set(self.answer_formats) - set(ANSWER_FORMATS) or not self.answer_formats:
            raise ValueError(f"answer formats must be among {ANSWER_FORMATS}")
        unknown = set(self.retrieval_override) - {f.name for f in dataclasses.fields(RetrievalConfig)}
        if unknown:
            raise ValueError(f"unknown retrieval settings {sorted(unknown)}")


@dataclass
class Outcome:
    items: int
    results: list[dict[str, Any]]
    reports: dict[str, Any]
    summaries: list[RunSummary]


def _evidence_index(corpus: Corpus, chunk_words: int):
    """Paragraph chunks of every article, dated or not, for LRAE stage 2 (built on first use)."""
    built: list[retrieval.EvidenceIndex] = []

    def get() -> retrieval.EvidenceIndex:
        if not built:
            ids, dates, texts = [], [], []
            for article_id, article in sorted(corpus.articles.items()):
                paragraphs = [p for p in article.text.split("\n") if p.strip()]
                for n, chunk in enumerate(
                    c for p in paragraphs for c in retrieval.chunk_words(p, chunk_words)
                ):
                    ids.append(f"{article_id}#{n}")
                    dates.append(article.published_at)
                    texts.append(chunk)
            built.append(retrieval.EvidenceIndex(ids, dates, texts))
        return built[0]

    return get


def run(config: Config) -> Outcome:
    """Evaluate every selected item in every setting; write results and reports."""
    started = time.time()
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
    )
    evidence = _evidence_index(corpus, config.lrae_chunk_words)
    judge_llm = config.judge_llm or config.llm
    model = config.llm.model
    base = f"eval/_runs/{report.model_slug(model)}"
    runner = StageRunner(config.root, base, config.llm, force=config.force, plan_only=config.plan)
    judge = StageRunner(
        config.root,
        f"{base}/judge-{report.model_slug(judge_llm.model)}",
        judge_llm,
        force=config.force,
        plan_only=config.plan,
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        groups[(item["benchmark"], item["task"])].append(item)
    requests: list[Request] = []
    rejected: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    setting_summaries: dict[tuple[str, str, str], RunSummary] = {}
    for (benchmark, task), group in sorted(groups.items()):
        kinds = {i["type"] for i in group}
        if len(kinds) != 1:
            raise ValueError(f"{benchmark}/{task}: items of several types {sorted(kinds)}")
        rc = retrieval_config(benchmark, config.retrieval, config.retrieval_override)
        for setting in settings_for(kinds.pop(), config.modes, config.retrievers, config.answer_formats):
            summary = RunSummary(name=f"evaluate/{benchmark}/{task}.{setting.name}", rows_read=len(group))
            setting_summaries[(benchmark, task, setting.name)] = summary
            for item in group:
                prepared = prepare(item, setting, corpus, rc, options)
                if isinstance(prepared, str):
                    summary.reject(prepared)
                    rejected[benchmark].append((item["item_id"], setting.name, prepared))
                else:
                    requests.append(prepared)
            summary.finish()  # its time is the preparation (retrieval) time
    outputs = run_forecasts(requests, runner, config.max_new_tokens)
    if config.plan:
        print(plan_table(runner.plans))
        return Outcome(len(items), [], {}, [*summaries, *runner.summaries])
    rows = [
        result_row(r, a, model, config.llm.backend, options) for r, a in zip(requests, outputs, strict=True)
    ]
    open_rows = [row for row in rows if row["type"] == "open"]
    judged = judge_open(
        open_rows, {(i["benchmark"], i["item_id"]): i for i in items}, judge, evidence, options
    )
    retrieval_log: dict[tuple[str, str, str], dict[str, Any]] = {}
    for request, row in zip(requests, rows, strict=True):
        row.pop("_answer", None)
        row.pop("_events", None)
        summary = setting_summaries[(row["benchmark"], row["task"], row["setting"])]
        summary.rows_written += 1
        summary.metrics["refusals"] = summary.metrics.get("refusals", 0) + row["refusal"]
        if request.k is not None:
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
    for benchmark in sorted(set(by_benchmark) | set(rejected)):
        report.write_results(config.root, benchmark, model, by_benchmark[benchmark])
        report.write_rejected(config.root, benchmark, model, rejected[benchmark])
    reports = report.write_reports(config.root, report.read_all_results(config.root), config.seed)
    all_summaries = [
        *summaries,
        *setting_summaries.values(),
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
            "prompt_versions": {**runner.prompts_used, **judge.prompts_used},
            "summaries": [s.to_dict() for s in all_summaries],
            "config": _plain(config),
            "seconds": round(time.time() - started, 1),
        },
    )
    print(combined_table(all_summaries, f"evaluate {model} on {config.llm.backend}"))
    print(f"leaderboard: {report.eval_uri(config.root, 'leaderboard.md')}")
    return Outcome(len(items), rows, reports, all_summaries)


def _plain(config: Config) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, LLMConfig):
            value = (
                {k: v for k, v in dataclasses.asdict(value).items() if k != "script"}
                if value.script is None
                else {
                    "backend": value.backend,
                    "model": value.model,
                }
            )
        elif isinstance(value, dict):
            value = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in value.items()}
        out[f.name] = value
    return out


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--root", required=True, help="root URI (path, file:// or s3://)")
    parser.add_argument(
        "--benchmarks", type=_csv, help="comma-separated discovered benchmarks (default: all)"
    )
    parser.add_argument(
        "--forecastbench", nargs=2, action="append", default=[], metavar=("QUESTIONS", "RESOLUTIONS")
    )
    parser.add_argument(
        "--questions", action="append", default=[], help="a udfs.questions JSONL/Parquet file"
    )
    parser.add_argument("--forecastqa", action="append", default=[], help="a ForecastQA public JSON file")
    parser.add_argument("--forecastqa-split", choices=["train", "dev", "test"])
    parser.add_argument("--splits", type=_csv, help="comma-separated splits (default: all)")
    parser.add_argument("--limit", type=int, help="at most N items per (benchmark, task)")
    parser.add_argument("--modes", type=_csv, default=MODES)
    parser.add_argument("--retrievers", type=_csv, default=("bm25",))
    parser.add_argument("--answer-formats", type=_csv, default=("choice",))
    parser.add_argument("--k", type=int, help="documents per question (all benchmarks)")
    parser.add_argument("--doc-words", type=int, help="words shown per document (all benchmarks)")
    parser.add_argument("--chunk-words", type=int, help="index chunks of N words (all benchmarks)")
    parser.add_argument("--background-words", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, help="cap on the forecasters' generated tokens")
    parser.add_argument("--model-cutoff", type=dt.date.fromisoformat, help="the model's knowledge cutoff")
    parser.add_argument("--judge-llm-config", help="YAML LLMConfig of the judge (default: the forecaster)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="recompute stages that already completed")
    parser.add_argument("--plan", action="store_true", help="print requests and token estimates; run nothing")
    add_llm_args(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    override = {
        name: value
        for name, value in (("k", args.k), ("doc_words", args.doc_words), ("chunk_words", args.chunk_words))
        if value is not None
    }
    run(
        Config(
            root=args.root,
            llm=from_args(args),
            judge_llm=LLMConfig.from_yaml(args.judge_llm_config) if args.judge_llm_config else None,
            benchmarks=args.benchmarks,
            forecastbench=tuple(tuple(pair) for pair in args.forecastbench),
            question_files=tuple(args.questions),
            forecastqa=tuple(args.forecastqa),
            forecastqa_split=args.forecastqa_split,
            splits=args.splits,
            limit=args.limit,
            modes=args.modes,
            retrievers=args.retrievers,
            answer_formats=args.answer_formats,
            retrieval_override=override,
            background_words=args.background_words,
            max_new_tokens=args.max_new_tokens,
            model_cutoff=args.model_cutoff,
            seed=args.seed,
            force=args.force,
            plan=args.plan,
        )
    )
