"""The TCELongBench builder: temporal complex events → outlines → detail / order / forecast QA.

Stages (``docs/tcelongbench.md``, spec ``tcelongbench.md``): S1 TCE formation (MiniLM + a time
feature + HDBSCAN + span filter); S2 article summaries and S3 day summaries; S4 key points; S5
key-point dedup and noise filter; gold-article choice; S6 detail and forecast questions, the
Evidence check and STARC distractors; the Plausible check; the voted Forecasting check; S7
entities and order windows, the voted Storytelling/Temporal check; S9 QA dedup, shuffles and the
split by TCE. LLM stages run through ``StageRunner`` (cached, resumable); the rest runs on the
driver. Every dropped row is written to ``tcelongbench/rejected`` with its stage and reason, and
every step's counts reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipelines.benchmarks import write_benchmark_table, write_card, write_eval_items
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.llm_smoke import plan_table
from udfs import storage
from udfs.embeddings import DEFAULT_ENCODER, embed
from udfs.ids import stable_id, stable_seed
from udfs.prompts import load_prompt
from udfs.report import RunSummary, combined_table
from udfs.schemas import ARTICLES
from udfs.tcelongbench import finalize, order, outline, qa, tce, verify
from udfs.tcelongbench.context import check_items, context_articles
from udfs.timeutil import to_utc

log = logging.getLogger("augury.tcelongbench")

NAME = "tcelongbench"
DETAIL, ORDER, FORECAST = "detail", "order", "forecast"
ORDER_QUESTION = "Arrange the following events in chronological order."

REJECTED_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("tce_id", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
    ]
)


@dataclass(frozen=True)
class Config:
    """Everything a run depends on; defaults follow the spec (paper values where it has them)."""

    root: str
    llm: LLMConfig = field(default_factory=LLMConfig)
    force: bool = False
    plan: bool = False
    seed: int = 0
    # S1 TCE formation
    topic_keywords: tuple[str, ...] = ()
    topic_hosts: tuple[str, ...] = ()
    languages: tuple[str, ...] = ("en",)
    min_chars: int = 500
    encoder: str = DEFAULT_ENCODER
    time_weight: float = 1.0
    time_scale_days: float = 14.0
    min_cluster_size: int = 10
    min_samples: int = 5
    min_span_days: int = 5
    max_span_days: int = 30
    max_tces: int | None = None  # demo/test limit
    max_articles_per_day: int | None = None  # demo/test limit
    # LLM inputs and outputs
    max_article_chars: int = 6000
    max_tokens: int | None = None  # caps every prompt's max_tokens (demo/test limit)
    # S5 key-point filter
    kp_dup_threshold: float = 0.8
    kp_noise_threshold: float = 0.2
    # S6-S8 verification
    evidence_min_match: float | None = None  # optional fuzzy match of the evidence sentence
    plausible_mode: str = "brief"
    plausible_max_word_spread: int = 10
    plausible_max_cosine: float = 0.8
    verify_rounds: int = 3
    verify_min_pass: int = 2
    # S9
    qa_dup_threshold: float = 0.8
    split_ratios: tuple[float, float, float] = (0.7, 0.15, 0.15)

    def __post_init__(self) -> None:
        if self.plausible_mode not in qa.PLAUSIBLE_MODES:
            raise ValueError(f"plausible_mode must be one of {qa.PLAUSIBLE_MODES}")
        if not 1 <= self.verify_min_pass <= self.verify_rounds:
            raise ValueError("verify_min_pass must lie in 1..verify_rounds")
        if self.min_span_days > self.max_span_days:
            raise ValueError("min_span_days exceeds max_span_days")


@dataclass
class Result:
    """The benchmark's tables by name and every step's summary."""

    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    card: dict[str, Any] | None


# ---------------------------------------------------------------------------------- LLM stages
def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields])


SUMMARY = _schema(("summary", pa.string()))
POINTS = _schema(("points", pa.list_(pa.string())))
QA_FIELDS = _schema(("question", pa.string()), ("answer", pa.string()))
EVIDENCE = _schema(("evidence_pass", pa.bool_()), ("evidence_sentence", pa.string()))
DISTRACTORS = _schema(*((f"distractor_{x}", pa.string()) for x in "bcd"))
VOTES = _schema(("q1", pa.string()), ("q2", pa.string()))
ENTITIES = _schema(("entities", pa.list_(pa.string())))


def prefixed(parser: Callable[[str], dict[str, Any]], prompt_id: str) -> Callable[[str], dict[str, Any]]:
    """The parser applied to the prompt's answer prefix plus the generated text, because the prefix
    (e.g. ``Question:`` or ``Q1:``) is the start of the answer the parser reads."""
    prefix = load_prompt(prompt_id).answer_prefix

    def parse(text: str) -> dict[str, Any]:
        return parser(prefix + text)

    return parse


def llm_stages(config: Config) -> dict[str, LLMStage]:
    """The builder's LLM stages, with the demo/test ``max_tokens`` cap applied."""

    def stage(
        name: str,
        parser,
        schema: pa.Schema,
        prompt: str | None = None,
        with_prefix: bool = True,
        samples: int = 1,
    ) -> LLMStage:
        prompt_id = f"{NAME}.{prompt or name}"
        default_max = load_prompt(prompt_id).sampling.get("max_tokens", 256)
        sampling = {"max_tokens": min(default_max, config.max_tokens)} if config.max_tokens else {}
        return LLMStage(
            name,
            prompt_id,
            parser=prefixed(parser, prompt_id) if with_prefix else parser,
            parsed_schema=schema,
            sampling=sampling,
            samples=samples,
            seed=config.seed,
        )

    rounds = config.verify_rounds
    return {
        "article_summary": stage("article_summary", outline.parse_summary, SUMMARY, with_prefix=False),
        "day_summary": stage("day_summary", outline.parse_summary, SUMMARY, with_prefix=False),
        "key_points": stage("key_points", outline.parse_key_points, POINTS),
        "detail_qa": stage("detail_qa", qa.parse_qa, QA_FIELDS),
        "forecast_qa": stage("forecast_qa", qa.parse_qa, QA_FIELDS),
        "evidence": stage("evidence", qa.parse_evidence, EVIDENCE),
        "distractors": stage("distractors", qa.parse_distractors, DISTRACTORS),
        "forecast_votes": stage(
            "forecast_votes", verify.parse_votes, VOTES, prompt="forecast_check", samples=rounds
        ),
        "entities": stage("entities", order.parse_entities, ENTITIES),
        "order_votes": stage("order_votes", verify.parse_votes, VOTES, prompt="order_check", samples=rounds),
    }


# ---------------------------------------------------------------------------------- bookkeeping
class Book:
    """Step summaries (LLM stages included, in pipeline order) and the rejected rows of one run."""

    def __init__(self) -> None:
        self.summaries: list[RunSummary] = []
        self.rejected: list[dict[str, Any]] = []

    def step(self, name: str) -> RunSummary:
        summary = RunSummary(name=f"{NAME}/{name}")
        self.summaries.append(summary)
        return summary

    def reject(
        self,
        summary: RunSummary | None,
        stage: str,
        tce_id: str | None,
        item_id: str | None,
        reason: str,
        detail: str | None = None,
    ) -> None:
        if summary is not None:
            summary.reject(reason)
        self.rejected.append(
            {"stage": stage, "tce_id": tce_id, "item_id": item_id, "reason": reason, "detail": detail}
        )

    def close(self, summary: RunSummary) -> None:
        summary.finish()
        if not summary.reconciles:
            raise AssertionError(f"{summary.name}: counts do not reconcile\n{summary.table()}")


def run_llm(
    runner: StageRunner, book: Book, stage: LLMStage, rows: list[dict[str, Any]], id_column: str
) -> list[dict[str, Any]]:
    """Run one LLM stage; failed rows go to the rejected list. Returns every output row (a stage
    with ``samples`` > 1 returns one row per sample)."""
    table = pa.Table.from_pylist(rows) if rows else pa.table({id_column: pa.array([], pa.string())})
    out = runner.run(stage, table).to_pylist()
    book.summaries.append(runner.summaries[-1])
    if len(out) != len(rows) * stage.samples:
        raise AssertionError(f"stage {stage.name}: {len(rows)} rows in, {len(out)} out")
    for row in out:
        if not row["parse_ok"]:
            book.reject(None, stage.name, row.get("tce_id"), row[id_column], row["parse_error"] or "unknown")
    return out


def _ok(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["parse_ok"]]


# ---------------------------------------------------------------------------------- run
def run(config: Config) -> Result:
    """Build the benchmark under ``<root>/benchmarks/tcelongbench/``; returns its tables."""
    runner = StageRunner(config.root, NAME, config.llm, force=config.force, plan_only=config.plan)
    stages = llm_stages(config)
    book = Book()

    # S1 --------------------------------------------------------------------------------------
    articles, tces, tce_articles = form_tces(config, book)
    tce_by_id = {t["tce_id"]: t for t in tces}
    members: dict[tuple[str, int], list[str]] = defaultdict(list)
    for row in tce_articles:
        members[(row["tce_id"], row["k"])].append(row["article_id"])

    def article_text(article_id: str) -> str:
        return outline.truncate_words(articles[article_id]["text"], config.max_article_chars)

    # S2 --------------------------------------------------------------------------------------
    summary_rows = [
        {
            "tce_id": r["tce_id"],
            "article_id": r["article_id"],
            "k": r["k"],
            "title": articles[r["article_id"]].get("title") or "",
            "text": article_text(r["article_id"]),
        }
        for r in tce_articles
    ]
    summarised = _ok(run_llm(runner, book, stages["article_summary"], summary_rows, "article_id"))

    # S3 --------------------------------------------------------------------------------------
    day_summaries = summarise_days(runner, book, stages["day_summary"], tces, summarised)

    # S4 --------------------------------------------------------------------------------------
    kp_out = _ok(run_llm(runner, book, stages["key_points"], day_summaries, "day_id"))
    raw_points = [
        {
            "kp_id": stable_id("kp", d["tce_id"], d["k"], j),
            "tce_id": d["tce_id"],
            "k": d["k"],
            "date": d["date"],
            "j": j,
            "text": text,
        }
        for d in kp_out
        for j, text in enumerate(d["points"], start=1)
    ]

    # S5 + gold articles ----------------------------------------------------------------------
    key_points = filter_points(config, book, raw_points)
    kept = [p for p in key_points if p["status"] == "kept"]
    attach_gold_articles(config, kept, articles, members)

    # S6 --------------------------------------------------------------------------------------
    candidates = generate_questions(config, runner, book, stages, kept, tce_by_id, article_text)
    verified = verify_evidence(config, runner, book, stages["evidence"], candidates, article_text)
    with_choices = add_distractors(
        config, runner, book, stages["distractors"], verified, tce_by_id, members, article_text
    )
    plausible = check_plausible(config, book, with_choices)
    mc_questions = [q for q in plausible if q["task"] == DETAIL] + vote_forecasts(
        config, runner, book, stages["forecast_votes"], [q for q in plausible if q["task"] == FORECAST]
    )

    # S7 --------------------------------------------------------------------------------------
    problems = build_order_problems(runner, book, stages["entities"], kept, tce_by_id)
    order_questions = vote_orders(config, runner, book, stages["order_votes"], problems)

    if config.plan:
        print(plan_table(runner.plans))
        return Result({}, book.summaries, None)

    # S9 --------------------------------------------------------------------------------------
    final = dedup_questions(config, book, mc_questions, order_questions)
    splits = finalize.assign_splits([t["tce_id"] for t in tces], config.split_ratios)
    tables, items = assemble(config, tces, tce_articles, day_summaries, key_points, final, splits)
    for name, table in tables.items():
        partition = ("split",) if name.startswith("qa_") else ()
        write_benchmark_table(config.root, NAME, name, table, partition)
    tables["eval_items"] = write_eval_items(config.root, NAME, items)
    rejected = pa.Table.from_pylist(book.rejected, schema=REJECTED_SCHEMA)
    storage.write_dataset(rejected, storage.join(config.root, NAME, "rejected"), replace="all")
    tables["rejected"] = rejected
    counts = {name: t.num_rows for name, t in tables.items()} | {
        "rejected_by_stage": dict(sorted(Counter(r["stage"] for r in book.rejected).items()))
    }
    card = write_card(config.root, NAME, runner, counts, config)
    print(combined_table(book.summaries, f"{NAME} on {config.llm.backend}:{config.llm.model}"))
    return Result(tables, book.summaries, card)


# ---------------------------------------------------------------------------------- S1
def form_tces(
    config: Config, book: Book
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Read the articles, pre-clean, embed, cluster and filter; returns the articles of kept TCEs
    by id, the TCEs and their ``tce_article`` rows."""
    summary = book.step("tce_formation")
    records = ARTICLES.read(config.root).to_pylist()
    summary.rows_read = len(records)
    topic = tce.TopicFilter(config.topic_keywords, config.topic_hosts)
    kept, rejects = tce.preclean(records, topic, config.min_chars, config.languages)
    vectors = embed([tce.embed_text(a) for a in kept], config.encoder)
    features = tce.cluster_features(
        vectors, [a["date"] for a in kept], config.time_weight, config.time_scale_days
    )
    labels = tce.cluster_labels(features, config.min_cluster_size, config.min_samples)
    tces, tce_articles, cluster_rejects = tce.form_tces(
        kept, labels, topic.key, config.min_span_days, config.max_span_days
    )
    tces, tce_articles, limited = tce.limit_tces(
        tces, tce_articles, config.max_tces, config.max_articles_per_day
    )
    for article, reason in rejects + cluster_rejects:
        book.reject(summary, "tce_formation", None, article["article_id"], reason)
    for row, reason in limited:
        book.reject(summary, "tce_formation", row["tce_id"], row["article_id"], reason)
    summary.rows_written = len(tce_articles)
    summary.metrics.update(tces=len(tces), clusters=len({int(x) for x in labels} - {tce.NOISE}))
    book.close(summary)
    used = {r["article_id"] for r in tce_articles}
    return {a["article_id"]: a for a in kept if a["article_id"] in used}, tces, tce_articles


# ---------------------------------------------------------------------------------- S3
def summarise_days(
    runner: StageRunner,
    book: Book,
    stage: LLMStage,
    tces: list[dict[str, Any]],
    summarised: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """One summary per TCE day: a single-article day reuses its article summary; a day with more
    summarised articles goes to the LLM; a day with none is rejected."""
    by_day: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in summarised:
        by_day[(row["tce_id"], row["k"])].append(row)
    summary = book.step("day_summaries")
    days, singles, multi = [], [], []
    for t in tces:
        for k, date in enumerate(t["dates"], start=1):
            day = {"day_id": stable_id("day", t["tce_id"], k), "tce_id": t["tce_id"], "k": k, "date": date}
            days.append(day)
            rows = sorted(by_day.get((t["tce_id"], k), []), key=lambda r: r["article_id"])
            if not rows:
                book.reject(summary, "day_summaries", t["tce_id"], day["day_id"], "no_article_summary")
            elif len(rows) == 1:
                singles.append({**day, "summary": rows[0]["summary"], "source": "article", "n_summaries": 1})
            else:
                multi.append({**day, "date": date.isoformat(), "summaries": [r["summary"] for r in rows]})
    summary.rows_read = len(days)
    merged = []
    for row in run_llm(runner, book, stage, multi, "day_id"):
        if row["parse_ok"]:
            date = dt.date.fromisoformat(row["date"])
            merged.append(
                {
                    **{k: row[k] for k in ("day_id", "tce_id", "k")},
                    "date": date,
                    "summary": row["summary"],
                    "source": "llm",
                    "n_summaries": len(row["summaries"]),
                }
            )
        else:
            summary.reject(row["parse_error"] or "unknown")
    out = sorted(singles + merged, key=lambda d: (d["tce_id"], d["k"]))
    summary.rows_written = len(out)
    book.close(summary)
    return out


# ---------------------------------------------------------------------------------- S5
def filter_points(config: Config, book: Book, raw_points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dedup and noise-filter the key points of every TCE (order ``(date, j)``); every point is
    returned with its status and scores."""
    summary = book.step("key_point_filter")
    summary.rows_read = len(raw_points)
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
            if d["status"] != "kept":
                book.reject(summary, "key_point_filter", tce_id, p["kp_id"], d["status"], dup_of)
    summary.rows_written = sum(p["status"] == "kept" for p in out)
    book.close(summary)
    return out


def attach_gold_articles(
    config: Config,
    points: list[dict[str, Any]],
    articles: dict[str, dict[str, Any]],
    members: dict[tuple[str, int], list[str]],
) -> None:
    """Set ``gold_article_id``/``gold_sim`` on every kept point: the article of its date with the
    highest MiniLM cosine."""
    if not points:
        return
    ids = sorted(articles)
    index = {a: i for i, a in enumerate(ids)}
    article_vectors = embed([tce.embed_text(articles[a]) for a in ids], config.encoder)
    point_vectors = embed([p["text"] for p in points], config.encoder)
    candidates = [[index[a] for a in members[(p["tce_id"], p["k"])]] for p in points]
    for p, (i, score) in zip(
        points, outline.choose_gold_articles(point_vectors, article_vectors, candidates), strict=True
    ):
        p["gold_article_id"], p["gold_sim"] = ids[i], score


# ---------------------------------------------------------------------------------- S6
def generate_questions(
    config: Config,
    runner: StageRunner,
    book: Book,
    stages: dict[str, LLMStage],
    points: list[dict[str, Any]],
    tce_by_id: dict[str, dict[str, Any]],
    article_text: Callable[[str], str],
) -> list[dict[str, Any]]:
    """Detail questions from kept points of days 1..n-1, forecast questions from day n. No question
    may repeat a few-shot example of its prompt; forecast questions must pass the hard rules
    (opener, Day present, no "before")."""

    def row(p: dict[str, Any], task: str) -> dict[str, Any]:
        t = tce_by_id[p["tce_id"]]
        if task == DETAIL and p["date"] > t["dates"][-2]:
            raise AssertionError(f"detail key point {p['kp_id']} dated after t_(n-1)")
        return {
            "qa_id": stable_id("qa", task, p["kp_id"]),
            "task": task,
            "tce_id": p["tce_id"],
            "kp_ids": [p["kp_id"]],
            "k": p["k"],
            "j": p["j"],
            "date": p["date"],
            "gold_article_id": p["gold_article_id"],
            "point": p["text"],
            "article": article_text(p["gold_article_id"]),
            "day": p["date"].isoformat(),
        }

    detail_rows = [row(p, DETAIL) for p in points if p["k"] < tce_by_id[p["tce_id"]]["n"]]
    forecast_rows = [row(p, FORECAST) for p in points if p["k"] == tce_by_id[p["tce_id"]]["n"]]
    details = _ok(run_llm(runner, book, stages["detail_qa"], detail_rows, "qa_id"))
    forecasts = _ok(run_llm(runner, book, stages["forecast_qa"], forecast_rows, "qa_id"))
    templates = {task: stages[f"{task}_qa"].prompt.user_template for task in (DETAIL, FORECAST)}
    summary = book.step("question_rules")
    summary.rows_read = len(details) + len(forecasts)
    passing = []
    for q in details + forecasts:
        problems = ["copied_example"] if qa.copied_example(q["question"], templates[q["task"]]) else []
        if q["task"] == FORECAST:
            problems += qa.forecast_question_problems(q["question"], q["day"])
        if problems:
            reason = f"{q['task']}_" + "+".join(problems)
            book.reject(summary, "question_rules", q["tce_id"], q["qa_id"], reason, q["question"])
        else:
            passing.append(q)
    summary.rows_written = len(passing)
    book.close(summary)
    return [_drop_contract(q) for q in passing]


def verify_evidence(
    config: Config,
    runner: StageRunner,
    book: Book,
    stage: LLMStage,
    candidates: list[dict[str, Any]],
    article_text: Callable[[str], str],
) -> list[dict[str, Any]]:
    """The Evidence check: keep a question only on the affirmative verdict (and, when
    ``evidence_min_match`` is set, only if the quoted sentence matches the article)."""
    out = _ok(run_llm(runner, book, stage, candidates, "qa_id"))
    summary = book.step("evidence_verdict")
    summary.rows_read = len(out)
    passing = []
    for q in out:
        match = qa.evidence_match(q["evidence_sentence"], q["article"])
        if not q["evidence_pass"]:
            book.reject(
                summary,
                "evidence_verdict",
                q["tce_id"],
                q["qa_id"],
                "answer_may_be_wrong",
                q["evidence_sentence"],
            )
        elif config.evidence_min_match is not None and match < config.evidence_min_match:
            book.reject(
                summary,
                "evidence_verdict",
                q["tce_id"],
                q["qa_id"],
                "evidence_not_in_article",
                q["evidence_sentence"],
            )
        else:
            passing.append({**_drop_contract(q), "evidence_match": match})
    summary.rows_written = len(passing)
    book.close(summary)
    return passing


def add_distractors(
    config: Config,
    runner: StageRunner,
    book: Book,
    stage: LLMStage,
    questions: list[dict[str, Any]],
    tce_by_id: dict[str, dict[str, Any]],
    members: dict[tuple[str, int], list[str]],
    article_text: Callable[[str], str],
) -> list[dict[str, Any]]:
    """Draw Background 2 (an article of another day among 1..n-1) and ask for the (b)(c)(d)
    distractors; returns the questions with their four choices (correct first)."""
    summary = book.step("background2")
    summary.rows_read = len(questions)
    rows = []
    for q in questions:
        t = tce_by_id[q["tce_id"]]
        by_day = {k: members[(q["tce_id"], k)] for k in range(1, t["n"] + 1)}
        pick = qa.pick_background(
            by_day, q["k"], range(1, t["n"]), stable_seed(config.seed, "background2", q["qa_id"])
        )
        if pick is None:
            book.reject(summary, "background2", q["tce_id"], q["qa_id"], "no_other_day_before_last")
            continue
        k2, article2 = pick
        if t["dates"][k2 - 1] >= t["dates"][-1]:
            raise AssertionError(f"{q['qa_id']}: Background 2 from the last day")
        rows.append(
            {
                **q,
                "background1": q["article"],
                "background2": article_text(article2),
                "background2_article_id": article2,
                "background2_date": t["dates"][k2 - 1],
            }
        )
    summary.rows_written = len(rows)
    book.close(summary)
    out = _ok(run_llm(runner, book, stage, rows, "qa_id"))
    return [
        {
            **_drop_contract(q),
            "choices": [q["answer"], q["distractor_b"], q["distractor_c"], q["distractor_d"]],
            "choice_types": ["correct", *qa.DISTRACTOR_TYPES],
        }
        for q in out
    ]


def check_plausible(config: Config, book: Book, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Plausible check on every question's four choices."""
    summary = book.step("plausible")
    summary.rows_read = len(questions)
    passing = []
    vectors = embed([c for q in questions for c in q["choices"]], config.encoder)
    for i, q in enumerate(questions):
        block = vectors[4 * i : 4 * i + 4]
        problems = qa.plausible_problems(
            q["choices"],
            block @ block.T,
            config.plausible_mode,
            config.plausible_max_word_spread,
            config.plausible_max_cosine,
        )
        if problems:
            book.reject(
                summary,
                "plausible",
                q["tce_id"],
                q["qa_id"],
                "plausible_" + "+".join(problems),
                " | ".join(q["choices"]),
            )
        else:
            passing.append(q)
    summary.rows_written = len(passing)
    book.close(summary)
    return passing


def _tally(
    config: Config, book: Book, name: str, check: str, items: list[dict[str, Any]], out: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Aggregate the voting rounds of each item (an unparseable round fails)."""
    rounds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in out:
        rounds[row["qa_id"]].append(row)
    summary = book.step(name)
    summary.rows_read = len(items)
    passing = []
    for item in items:
        got = sorted(rounds[item["qa_id"]], key=lambda r: r["sample_index"])
        passes = [r["parse_ok"] and verify.round_passes(check, r["q1"], r["q2"]) for r in got]
        votes = [f"{r['q1']}{r['q2']}" if r["parse_ok"] else "--" for r in got]
        n_pass = sum(passes)
        if verify.vote(passes, config.verify_min_pass):
            passing.append({**item, "votes": votes, "votes_passed": n_pass})
        else:
            book.reject(
                summary, name, item["tce_id"], item["qa_id"], f"votes_{n_pass}_of_{len(got)}", ",".join(votes)
            )
    summary.rows_written = len(passing)
    book.close(summary)
    return passing


def vote_forecasts(
    config: Config, runner: StageRunner, book: Book, stage: LLMStage, questions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The Forecasting check: ``verify_rounds`` sampled rounds per question, majority rule."""
    rows = [
        {"qa_id": q["qa_id"], "tce_id": q["tce_id"], "question": q["question"], "day": q["day"]}
        for q in questions
    ]
    out = run_llm(runner, book, stage, rows, "qa_id")
    return _tally(config, book, "forecast_votes_tally", verify.FORECASTING, questions, out)


# ---------------------------------------------------------------------------------- S7
def build_order_problems(
    runner: StageRunner,
    book: Book,
    stage: LLMStage,
    points: list[dict[str, Any]],
    tce_by_id: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """Entities of the kept points of days 1..n-1 (only TCEs with ≥ 3 such days), then every
    order window."""
    eligible = [
        {"kp_id": p["kp_id"], "tce_id": p["tce_id"], "point": p["text"]}
        for p in points
        if tce_by_id[p["tce_id"]]["n"] - 1 >= order.WINDOW and p["k"] < tce_by_id[p["tce_id"]]["n"]
    ]
    entities = {r["kp_id"]: r["entities"] for r in _ok(run_llm(runner, book, stage, eligible, "kp_id"))}
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        if p["kp_id"] in entities:
            by_tce[p["tce_id"]].append({**p, "entities": entities[p["kp_id"]]})
    problems = []
    for tce_id in sorted(by_tce):
        last_allowed = tce_by_id[tce_id]["dates"][-2]
        for w in order.order_windows(by_tce[tce_id]):
            if max(w["dates"]) > last_allowed:
                raise AssertionError(f"order window of {tce_id} reaches the last day")
            problems.append(
                {"qa_id": stable_id("qa", ORDER, tce_id, w["entity"], *w["kp_ids"]), "tce_id": tce_id, **w}
            )
    return problems


def vote_orders(
    config: Config, runner: StageRunner, book: Book, stage: LLMStage, problems: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The Storytelling + Temporal check on each problem's points in gold order, majority rule."""
    rows = [{"qa_id": p["qa_id"], "tce_id": p["tce_id"], "points": p["points"]} for p in problems]
    out = run_llm(runner, book, stage, rows, "qa_id")
    return _tally(config, book, "order_votes_tally", verify.STORY_TEMPORAL, problems, out)


# ---------------------------------------------------------------------------------- S9
def dedup_questions(
    config: Config, book: Book, mc_questions: list[dict[str, Any]], order_questions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Within each TCE and task, in generation order: drop detail/forecast questions too similar
    to an earlier kept one and order problems sharing more than one key point with one."""
    summary = book.step("qa_dedup")
    summary.rows_read = len(mc_questions) + len(order_questions)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in mc_questions:
        groups[(q["tce_id"], q["task"])].append(q)
    kept = []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda q: (q["date"], q["j"], q["qa_id"]))
        vectors = embed([q["question"] for q in group], config.encoder)
        for q, dup in zip(group, finalize.dedup_questions(vectors, config.qa_dup_threshold), strict=True):
            if dup is None:
                kept.append(q)
            else:
                book.reject(
                    summary, "qa_dedup", q["tce_id"], q["qa_id"], "duplicate_question", group[dup]["qa_id"]
                )
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in order_questions:
        by_tce[p["tce_id"]].append(p)
    for tce_id in sorted(by_tce):
        group = by_tce[tce_id]  # already in generation order
        for p, dup in zip(group, order.dedup_order([p["kp_ids"] for p in group]), strict=True):
            if dup is None:
                kept.append({**p, "task": ORDER})
            else:
                book.reject(summary, "qa_dedup", tce_id, p["qa_id"], "shares_key_points", group[dup]["qa_id"])
    summary.rows_written = len(kept)
    book.close(summary)
    return kept


def assemble(
    config: Config,
    tces: list[dict[str, Any]],
    tce_articles: list[dict[str, Any]],
    day_summaries: list[dict[str, Any]],
    key_points: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    splits: dict[str, str],
) -> tuple[dict[str, pa.Table], list[dict[str, Any]]]:
    """The benchmark tables and the evaluation items (choices shuffled, context = days 1..n-1)."""
    tce_by_id = {t["tce_id"]: t for t in tces}
    context = context_articles(tce_articles, tces)
    context_ids: dict[str, list[str]] = defaultdict(list)
    for row in context:
        context_ids[row["tce_id"]].append(row["article_id"])
    qa_rows: dict[str, list[dict[str, Any]]] = {DETAIL: [], ORDER: [], FORECAST: []}
    items = []
    for q in questions:
        t = tce_by_id[q["tce_id"]]
        t_n, cutoff = t["dates"][-1], t["dates"][-2]
        base = {
            "qa_id": q["qa_id"],
            "tce_id": q["tce_id"],
            "split": splits[q["tce_id"]],
            "task": q["task"],
            "cutoff_date": cutoff,
            "t_n": t_n,
        }
        item = {
            "benchmark": NAME,
            "split": base["split"],
            "t_cut": to_utc(t_n),
            "context_article_ids": context_ids[q["tce_id"]],
            "source_id": q["qa_id"],
        }
        if q["task"] == ORDER:
            perm, gold, letters = finalize.shuffle_order(len(q["points"]), q["qa_id"], config.seed)
            choices = [q["points"][i] for i in perm]
            qa_rows[ORDER].append(
                {
                    **base,
                    "entity": q["entity"],
                    "choices": choices,
                    "kp_ids": [q["kp_ids"][i] for i in perm],
                    "choice_dates": [q["dates"][i] for i in perm],
                    "gold_order": letters,
                    "gold_dates": list(q["dates"]),
                    "votes": q["votes"],
                    "votes_passed": q["votes_passed"],
                }
            )
            items.append(
                {
                    **item,
                    "item_id": q["qa_id"],
                    "task": ORDER,
                    "type": "ordering",
                    "question": ORDER_QUESTION,
                    "choices": choices,
                    "gold_order": gold,
                }
            )
            continue
        perm, letter = finalize.shuffle_choices(q["choices"], q["qa_id"], config.seed)
        choices = [q["choices"][i] for i in perm]
        row = {
            **base,
            "question": q["question"],
            "choices": choices,
            "choice_types": [q["choice_types"][i] for i in perm],
            "answer_letter": letter,
            "gold": q["answer"],
            "kp_ids": q["kp_ids"],
            "key_point": q["point"],
            "gold_article_id": q["gold_article_id"],
            "gold_date": q["date"],
            "background2_article_id": q["background2_article_id"],
            "background2_date": q["background2_date"],
            "evidence_sentence": q["evidence_sentence"],
            "evidence_match": q["evidence_match"],
        }
        gold_index = perm.index(0)
        if q["task"] == DETAIL:
            if q["date"] > cutoff:
                raise AssertionError(f"{q['qa_id']}: detail gold date after t_(n-1)")
            qa_rows[DETAIL].append(row)
            # The gold article lies inside the allowed context (it is what the reader must find), so
            # it is not listed as an excluded gold article; qa_detail keeps gold_article_id/gold_date.
            items.append(
                {
                    **item,
                    "item_id": q["qa_id"],
                    "task": DETAIL,
                    "type": "mc",
                    "question": q["question"],
                    "choices": choices,
                    "gold_index": gold_index,
                }
            )
        else:
            if q["date"] != t_n:
                raise AssertionError(f"{q['qa_id']}: forecast gold date is not t_n")
            qa_rows[FORECAST].append(
                {**row, "open_answer": q["answer"], "votes": q["votes"], "votes_passed": q["votes_passed"]}
            )
            forecast = {
                **item,
                "t_resolve": to_utc(t_n + dt.timedelta(days=1)),
                "gold_article_ids": [q["gold_article_id"]],
                "question": q["question"],
            }
            items.append(
                {
                    **forecast,
                    "item_id": q["qa_id"],
                    "task": FORECAST,
                    "type": "mc",
                    "choices": choices,
                    "gold_index": gold_index,
                }
            )
            items.append(
                {
                    **forecast,
                    "item_id": q["qa_id"] + ":open",
                    "task": "forecast_open",
                    "type": "open",
                    "gold_texts": [q["answer"]],
                }
            )
    check_items(items, {r["article_id"]: r["date"] for r in tce_articles})
    tables = {
        "tce": pa.Table.from_pylist([{**t, "split": splits[t["tce_id"]]} for t in tces], schema=TCE_SCHEMA),
        "tce_article": pa.Table.from_pylist(tce_articles, schema=TCE_ARTICLE_SCHEMA),
        "context": pa.Table.from_pylist(context, schema=CONTEXT_SCHEMA),
        "day_summary": pa.Table.from_pylist(day_summaries, schema=DAY_SUMMARY_SCHEMA),
        "key_point": pa.Table.from_pylist(key_points, schema=KEY_POINT_SCHEMA),
        "qa_detail": pa.Table.from_pylist(qa_rows[DETAIL], schema=QA_DETAIL_SCHEMA),
        "qa_order": pa.Table.from_pylist(qa_rows[ORDER], schema=QA_ORDER_SCHEMA),
        "qa_forecast": pa.Table.from_pylist(qa_rows[FORECAST], schema=QA_FORECAST_SCHEMA),
    }
    return tables, items


def _drop_contract(row: dict[str, Any]) -> dict[str, Any]:
    """A stage's output row without the LLM contract columns (provenance stays in the stage output)."""
    from udfs.llm_rows import OUTPUT_COLUMNS

    return {k: v for k, v in row.items() if k not in OUTPUT_COLUMNS}


# ---------------------------------------------------------------------------------- schemas
STR, DATE, INT, FLT = pa.string(), pa.date32(), pa.int32(), pa.float64()
TCE_SCHEMA = _schema(
    ("tce_id", STR), ("partition_key", STR), ("n", INT), ("span_days", INT), ("n_articles", INT),
    ("dates", pa.list_(DATE)), ("start_date", DATE), ("end_date", DATE), ("split", STR),
)  # fmt: skip
TCE_ARTICLE_SCHEMA = _schema(("tce_id", STR), ("article_id", STR), ("date", DATE), ("k", INT))
CONTEXT_SCHEMA = _schema(
    ("tce_id", STR), ("article_id", STR), ("date", DATE), ("k", INT), ("cutoff_date", DATE)
)
DAY_SUMMARY_SCHEMA = _schema(
    ("day_id", STR),
    ("tce_id", STR),
    ("k", INT),
    ("date", DATE),
    ("summary", STR),
    ("source", STR),
    ("n_summaries", INT),
)
KEY_POINT_SCHEMA = _schema(
    ("kp_id", STR), ("tce_id", STR), ("k", INT), ("date", DATE), ("j", INT), ("text", STR), ("status", STR),
    ("dup_of", STR), ("max_sim_earlier", FLT), ("mean_sim_kept", FLT), ("gold_article_id", STR), ("gold_sim", FLT),
)  # fmt: skip
_QA_COMMON = [
    ("qa_id", STR), ("tce_id", STR), ("split", STR), ("task", STR), ("cutoff_date", DATE), ("t_n", DATE),
    ("question", STR), ("choices", pa.list_(STR)), ("choice_types", pa.list_(STR)), ("answer_letter", STR),
    ("gold", STR), ("kp_ids", pa.list_(STR)), ("key_point", STR), ("gold_article_id", STR), ("gold_date", DATE),
    ("background2_article_id", STR), ("background2_date", DATE), ("evidence_sentence", STR), ("evidence_match", FLT),
]  # fmt: skip
QA_DETAIL_SCHEMA = _schema(*_QA_COMMON)
QA_FORECAST_SCHEMA = _schema(
    *_QA_COMMON, ("open_answer", STR), ("votes", pa.list_(STR)), ("votes_passed", INT)
)
QA_ORDER_SCHEMA = _schema(
    ("qa_id", STR), ("tce_id", STR), ("split", STR), ("task", STR), ("cutoff_date", DATE), ("t_n", DATE), ("entity", STR),
    ("choices", pa.list_(STR)), ("kp_ids", pa.list_(STR)), ("choice_dates", pa.list_(DATE)), ("gold_order", STR),
    ("gold_dates", pa.list_(DATE)), ("votes", pa.list_(STR)), ("votes_passed", INT),
)  # fmt: skip
