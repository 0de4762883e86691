"""Daily Oracle builder: forecasting questions from each day's news, built day by day.

For every publication day D not built yet: pre-filter the day's articles, select 3 random + 3
hot-topic ones (``udfs.daily_oracle.selection``), then five LLM stages, each one batched pass
over every pending day's rows:

1. ``summary``: summary + the new-event keypoint; articles with no new event drop out;
2. ``qa``: four questions (Will…? Yes, Will…? No, two wh-questions), exactly four pairs or none;
3. ``distractors``: three wrong options for each MC question;
4. ``filter``: the seven principles, 0–2 points each; a question is kept with ≥ 13 of 14;
5. ``category``: one of 11 labels, a choice request (never affects filtering).

Checks that need no model (TF answers, ``?``, "according"/"article", an explicit time element)
run right after step 2, so the paid steps only see questions that can still be kept. Running
the authors' checks (``?``, "according"/"article") early keeps what running them last would; the
time-element check is our own post-filter, so the kept set is a subset of the authors' code's
(stricter by the questions without an explicit time element ending on or after D - 1).
Before writing, every kept question is checked against the benchmark's invariants; a violation
rejects the question (``invariant_violation``) instead of stopping the run.

Outputs (``benchmarks/daily_oracle/``, partitioned by ``date`` = resolution date = publication
date): ``selection``, ``tf_questions``, ``mc_questions``, ``rejected`` (every dropped article and
question with its reason), ``eval_items`` and the dataset card. A day is marked done under
``daily_oracle/days/date=D/`` once its tables are written, unless one of its requests ended with
an engine error or the corpus has no article of that day: such a day is built again by the next
run. A marked day is skipped unless ``force`` asks for it again; a rerun of built days sends no
request to the model, and ``force`` rebuilds from the cached responses (delete
``<root>/daily_oracle/<stage>/`` to recompute a stage's answers).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import string
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.benchmarks import benchmark_uri, write_benchmark_table, write_card, write_eval_items
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from udfs import storage
from udfs.daily_oracle.parsing import (
    CATEGORIES,
    OTHER,
    clean_option,
    is_no_new_event,
    normalise_category,
    parse_distractors,
    parse_filter,
    parse_qa,
    parse_summary,
)
from udfs.daily_oracle.questions import (
    LETTERS,
    TF_EXPECTED,
    TimeElement,
    clean_question,
    distractor_problem,
    keep,
    mc_stem,
    normalise_yes_no,
    output_problems,
    shuffle_options,
    structural_problem,
    time_element,
)
from udfs.daily_oracle.selection import DEFAULT_PUBLISHERS, Pick, check_same_day, prefilter, select_day
from udfs.daily_oracle.tables import MC_SCHEMA, REJECTED_SCHEMA, SELECTION_SCHEMA, TABLES, TF_SCHEMA
from udfs.eval_items import YES_NO
from udfs.ids import stable_id
from udfs.prompts import load_prompt
from udfs.report import RunSummary, combined_table
from udfs.schemas import ARTICLES

log = logging.getLogger("augury.daily_oracle")

NAME = "daily_oracle"
MC_INDEXES = (3, 4)


@dataclass(frozen=True)
class Config:
    """What to build and how. ``dates`` empty: every corpus day at least ``settle_days`` old
    (late CC-NEWS captures of a day arrive for a few days; spec §8.2)."""

    root: str
    dates: tuple[dt.date, ...] = ()
    publishers: tuple[str, ...] = DEFAULT_PUBLISHERS
    n_random: int = 3
    n_hot: int = 3
    seed: int = 0
    llm: LLMConfig = field(default_factory=LLMConfig)
    max_tokens: int | None = None  # cap on generated tokens of every generate step (None: 1024, filter 2048)
    article_chars: int | None = None  # cut the article shown to the model (None: whole text)
    exclude_diagonal: bool = False  # coherence mean without the zero diagonal (spec §8.5)
    settle_days: int = 3
    force: bool = False  # rebuild requested days even if done (cached responses are reused)


@dataclass
class Result:
    """What a run did: days built (and marked done), skipped and left unmarked (with the reason),
    this run's rows, summaries and the card."""

    days_built: list[dt.date]
    days_skipped: list[dt.date]
    tables: dict[str, pa.Table]
    summaries: list[RunSummary]
    requests_computed: int
    card: dict[str, Any] | None
    days_unmarked: dict[dt.date, str] = field(default_factory=dict)


# ------------------------------------------------------------------ units of work
@dataclass
class _Article:
    row: dict[str, Any]
    day: dt.date
    pick: Pick
    day_articles: int
    summary: str | None = None
    keypoint: str | None = None
    rejection: dict[str, Any] | None = None
    questions: list[_Question] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.row["article_id"]


@dataclass
class _Question:
    article: _Article
    index: int
    question: str
    answer: str
    time: TimeElement | None = None
    distractors: list[str] | None = None
    scores: list[int] | None = None
    filter_raw: str | None = None
    category: str = OTHER
    category_prob: float | None = None
    category_fallback: str | None = None  # why the category fell back to Other
    rejection: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        return stable_id(NAME, self.article.id, self.index)

    @property
    def is_mc(self) -> bool:
        return self.index in MC_INDEXES

    @property
    def alive(self) -> bool:
        return self.rejection is None


def _reject(stage: str, reason: str, detail: str | None = None, raw: str | None = None) -> dict[str, Any]:
    return {"stage": stage, "reason": reason, "detail": detail, "raw_text": raw}


def _error_kind(row: dict[str, Any]) -> str:
    """``engine_error`` or ``parse_error``: why a stage row failed."""
    return "engine_error" if (row["parse_error"] or "").startswith("engine") else "parse_error"


def _failure(stage: str, row: dict[str, Any]) -> dict[str, Any]:
    """The rejection of a unit whose stage row failed (engine error or parse error)."""
    return _reject(stage, f"{stage}_{_error_kind(row)}", row["parse_error"] or "unknown", row["raw_text"])


def _is_engine_error(reason: str) -> bool:
    return reason.endswith("_engine_error")


# ------------------------------------------------------------------ stages
def _bare(text: str) -> str:
    """Text without leading whitespace and ``*``, case-folded (to spot a repeated prefix)."""
    return text.lstrip(string.whitespace + "*").casefold()


def _assistant_turn(
    parser: Callable[[str], dict[str, Any]], prompt_id: str
) -> Callable[[str], dict[str, Any]]:
    """Parse the whole assistant turn: the prompt's answer prefix plus the generated text. When
    the model repeats the prefix itself (leading whitespace and ``*`` aside), the generated
    text is parsed alone, so the prefix is not seen twice."""
    prefix = load_prompt(prompt_id).answer_prefix
    bare_prefix = _bare(prefix)

    def parse(text: str) -> dict[str, Any]:
        repeated = bool(bare_prefix) and _bare(text).startswith(bare_prefix)
        return parser(text if repeated else prefix + text)

    return parse


SUMMARY_SCHEMA = pa.schema([pa.field("summary", pa.string()), pa.field("keypoint", pa.string())])
QA_SCHEMA = pa.schema(
    [pa.field("questions", pa.list_(pa.string())), pa.field("answers", pa.list_(pa.string()))]
)
DISTRACTORS_SCHEMA = pa.schema([pa.field("distractors", pa.list_(pa.string()))])
FILTER_SCHEMA = pa.schema(
    [
        pa.field("filter_scores", pa.list_(pa.list_(pa.int64()))),
        pa.field("filter_errors", pa.list_(pa.string())),
        pa.field("filter_blocks", pa.list_(pa.string())),
    ]
)


def stages(config: Config) -> dict[str, LLMStage]:
    """The five LLM stages; ``max_tokens`` caps every generate step when set."""
    sampling = {"max_tokens": config.max_tokens} if config.max_tokens else {}

    def generate(name: str, parser: Callable[[str], dict[str, Any]], schema: pa.Schema) -> LLMStage:
        prompt_id = f"{NAME}.{name}"
        return LLMStage(
            name,
            prompt_id,
            parser=_assistant_turn(parser, prompt_id),
            parsed_schema=schema,
            sampling=sampling,
        )

    return {
        "summary": generate("summary", parse_summary, SUMMARY_SCHEMA),
        "qa": generate("qa", parse_qa, QA_SCHEMA),
        "distractors": generate("distractors", parse_distractors, DISTRACTORS_SCHEMA),
        "filter": generate("filter", parse_filter, FILTER_SCHEMA),
        "category": LLMStage("category", f"{NAME}.category"),
    }


def _date_label(day: dt.date) -> str:
    """``YYYY-MM-DD, Weekday`` as the authors' prompts show dates."""
    return f"{day.isoformat()}, {day.strftime('%A')}"


def _run_stage(
    runner: StageRunner, stage: LLMStage, units: list[Any], variables: Callable[[Any], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One batched pass over ``units``; returns the output rows in unit order."""
    rows = (
        pa.Table.from_pylist([variables(u) for u in units])
        if units
        else pa.table({"unit": pa.array([], pa.string())})
    )
    out = runner.run(stage, rows).to_pylist()
    if len(out) != len(units):
        raise RuntimeError(f"stage {stage.name}: {len(units)} rows in, {len(out)} out")
    return out


# ------------------------------------------------------------------ the run
def day_uri(root: str, day: dt.date) -> str:
    """Where a day's completion marker lives."""
    return storage.join(root, NAME, "days", f"date={day.isoformat()}")


def corpus_days(root: str) -> list[dt.date]:
    """Every publication day in the corpus (undated articles have none)."""
    days = ARTICLES.read(root, columns=["published_date"]).column("published_date")
    return sorted({d for d in days.to_pylist() if d is not None})


def run(config: Config) -> Result:
    """Build every requested day that is not marked done yet (all of them with ``force``)."""
    if config.dates:
        days = sorted(set(config.dates))
    else:
        latest = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=config.settle_days)
        days = [d for d in corpus_days(config.root) if d <= latest]
    pending = [d for d in days if config.force or not storage.is_done(day_uri(config.root, d))]
    skipped = [d for d in days if d not in pending]
    if skipped:
        log.info("skipping %d built days: %s", len(skipped), ", ".join(map(str, skipped)))
    runner = StageRunner(config.root, NAME, config.llm)
    if not pending:
        card = None
        if skipped and not _outputs_current(config.root):
            log.info("eval_items or the dataset card is missing or behind the day markers: rewriting them")
            card = _write_outputs(config, runner, [], skipped, {})
        print(f"daily_oracle: nothing to build ({len(skipped)} requested days already built)")
        return Result([], skipped, {}, [], 0, card)

    articles, summaries, prefiltered = select_articles(config, pending)
    llm = stages(config)
    _summarise(runner, llm["summary"], articles, config)
    questions = _generate_questions(runner, llm["qa"], articles, config)
    _add_distractors(runner, llm["distractors"], questions, config)
    _score(runner, llm["filter"], questions, config)
    _categorise(runner, llm["category"], [q for q in questions if q.alive])
    versions = json.dumps(dict(sorted(runner.prompts_used.items())), sort_keys=True)
    tf, mc = _kept_rows(questions, config, versions)
    summaries += _reconcile(articles, questions)

    tables = _tables(articles, questions, tf, mc)
    for day in pending:  # a forced day counts as done again only once it is rewritten
        storage.delete(day_uri(config.root, day))
    _write_days(config.root, pending, tables)
    unmarked = _mark_days(config.root, pending, articles, questions, prefiltered)
    built = [d for d in pending if d not in unmarked]
    summaries.append(_days_summary(pending, unmarked))
    card = _write_outputs(config, runner, built, skipped, unmarked)
    computed = sum(s.metrics.get("requests_computed", 0) for s in runner.summaries)
    all_summaries = summaries[:2] + runner.summaries + summaries[2:]
    print(combined_table(all_summaries, f"daily_oracle on {config.llm.backend}:{config.llm.model}"))
    return Result(built, skipped, tables, all_summaries, computed, card, unmarked)


def _mark_days(
    root: str,
    days: list[dt.date],
    articles: list[_Article],
    questions: list[_Question],
    prefiltered: dict[dt.date, dict[str, Any]],
) -> dict[dt.date, str]:
    """Mark each built day done, except a day without any article in the corpus (ingesting it
    later builds it) or with an engine error (the next run retries it); returns those days with
    the reason."""
    unmarked: dict[dt.date, str] = {}
    for day in days:
        counts = _day_counts(day, articles, questions, prefiltered[day])
        if not prefiltered[day]["articles"]:
            unmarked[day] = "no_articles"
            log.warning("%s: no articles; not marked", day)
        elif counts["engine_errors"]:
            unmarked[day] = "engine_error"
            log.warning(
                "%s: %d units ended with an engine error; tables written, not marked (the next run rebuilds it)",
                day,
                counts["engine_errors"],
            )
        else:
            storage.mark_done(day_uri(root, day), counts)
    return unmarked


def _days_summary(days: list[dt.date], unmarked: dict[dt.date, str]) -> RunSummary:
    """Pending days: marked done, or left unmarked by reason."""
    summary = RunSummary(name=f"{NAME}/days")
    summary.rows_read = len(days)
    summary.rows_written = len(days) - len(unmarked)
    for reason in unmarked.values():
        summary.reject(reason)
    return summary.finish()


def select_articles(
    config: Config, days: list[dt.date]
) -> tuple[list[_Article], list[RunSummary], dict[dt.date, dict[str, Any]]]:
    """Pre-filter and select every pending day; returns the picked articles, two summaries and
    each day's pre-filter counts."""
    table = ARTICLES.read(config.root, filter=pc.field("published_date").isin(pa.array(days, pa.date32())))
    by_day: dict[dt.date, list[dict[str, Any]]] = defaultdict(list)
    for row in table.to_pylist():
        by_day[row["published_date"]].append(row)
    pre = RunSummary(name=f"{NAME}/prefilter")
    sel = RunSummary(name=f"{NAME}/select")
    picked: list[_Article] = []
    prefiltered: dict[dt.date, dict[str, Any]] = {}
    for day in days:
        rows = by_day.get(day, [])
        check_same_day([r for r in rows if r.get("published_at") is not None], day)
        kept, dropped = prefilter(rows, config.publishers)
        pre.rows_read += len(rows)
        pre.rows_written += len(kept)
        for _, reason in dropped:
            pre.reject(reason)
        prefiltered[day] = {
            "articles": len(rows),
            "eligible": len(kept),
            "dropped_by_reason": dict(Counter(reason for _, reason in dropped)),
        }
        by_id = {r["article_id"]: r for r in kept}
        choice = select_day(
            day,
            [r["article_id"] for r in kept],
            [r["text"] for r in kept],
            config.seed,
            config.n_random,
            config.n_hot,
            config.exclude_diagonal,
        )
        day_picks = [_Article(by_id[p.article_id], day, p, len(kept)) for p in choice.picks]
        check_same_day([a.row for a in day_picks], day)
        picked += day_picks
        sel.rows_read += len(kept)
        sel.rows_written += len(day_picks)
        sel.reject("not_sampled", len(kept) - len(day_picks))
        log.info(
            "%s: %d articles, %d after pre-filters, %d clusters (%d coherent), %d picked",
            day,
            len(rows),
            len(kept),
            len(choice.clusters),
            sum(c.coherent for c in choice.clusters),
            len(day_picks),
        )
    return picked, [pre.finish(), sel.finish()], prefiltered


def _article_text(text: str, config: Config) -> str:
    return text[: config.article_chars] if config.article_chars else text


def _summarise(runner: StageRunner, stage: LLMStage, articles: list[_Article], config: Config) -> None:
    out = _run_stage(
        runner,
        stage,
        articles,
        lambda a: {
            "unit": a.id,
            "article": _article_text(a.row["text"], config),
            "publish_date": _date_label(a.day),
        },
    )
    for article, row in zip(articles, out, strict=True):
        if not row["parse_ok"]:
            article.rejection = _failure("summary", row)
        elif is_no_new_event(row["keypoint"]):
            article.rejection = _reject("summary", "no_new_event", row["keypoint"], row["raw_text"])
        else:
            article.summary, article.keypoint = row["summary"], row["keypoint"]


def _generate_questions(
    runner: StageRunner, stage: LLMStage, articles: list[_Article], config: Config
) -> list[_Question]:
    """Step 2 and the checks that need no model; returns every question of every article with
    four parsed pairs (rejected ones included, with their reason)."""
    active = [a for a in articles if a.rejection is None]
    out = _run_stage(
        runner,
        stage,
        active,
        lambda a: {
            "unit": a.id,
            "article": _article_text(a.row["text"], config),
            "publish_date": _date_label(a.day),
            "keypoint": a.keypoint,
            "month_year": a.day.strftime("%B %Y"),
        },
    )
    questions: list[_Question] = []
    for article, row in zip(active, out, strict=True):
        if not row["parse_ok"]:
            article.rejection = _failure("qa", row)
            continue
        for index, (text, answer) in enumerate(zip(row["questions"], row["answers"], strict=True), start=1):
            q = _Question(article, index, clean_question(text), answer.strip())
            q.rejection = _check_question(q, row["raw_text"])
            article.questions.append(q)
            questions.append(q)
    return questions


def _check_question(q: _Question, raw: str) -> dict[str, Any] | None:
    if q.index in TF_EXPECTED:
        normalised = normalise_yes_no(q.answer)
        if normalised != TF_EXPECTED[q.index]:
            return _reject(
                "qa", "tf_answer_mismatch", f"expected {TF_EXPECTED[q.index]}, got {q.answer!r}", raw
            )
        q.answer = normalised
    else:
        q.answer = clean_option(q.answer)
    problem = structural_problem(q.question, q.article.day)
    if problem:
        return _reject("postfilter", problem[0], problem[1], raw)
    q.time = time_element(q.question)
    return None


def _add_distractors(
    runner: StageRunner, stage: LLMStage, questions: list[_Question], config: Config
) -> None:
    """Step 3, one call per article with a live MC question (the prompt always shows both)."""
    by_article: dict[str, list[_Question]] = defaultdict(list)
    for q in questions:
        if q.is_mc:
            by_article[q.article.id].append(q)
    units = [pair for pair in by_article.values() if any(q.alive for q in pair)]
    out = _run_stage(
        runner,
        stage,
        units,
        lambda pair: {
            "unit": pair[0].article.id,
            "article": _article_text(pair[0].article.row["text"], config),
            "question_1": pair[0].question,
            "answer_1": pair[0].answer,
            "question_2": pair[1].question,
            "answer_2": pair[1].answer,
        },
    )
    for pair, row in zip(units, out, strict=True):
        for k, q in enumerate(pair):
            if not q.alive:
                continue
            if not row["parse_ok"]:
                q.rejection = _failure("distractors", row)
                continue
            q.distractors = row["distractors"][3 * k : 3 * k + 3]
            problem = distractor_problem(q.answer, q.distractors)
            if problem:
                q.rejection = _reject("distractors", problem[0], problem[1], row["raw_text"])


def _score(runner: StageRunner, stage: LLMStage, questions: list[_Question], config: Config) -> None:
    """Step 4, one call per article with a live question (the judge always sees all four)."""
    by_article: dict[str, list[_Question]] = defaultdict(list)
    for q in questions:
        by_article[q.article.id].append(q)
    units = [qs for qs in by_article.values() if any(q.alive for q in qs)]

    def variables(qs: list[_Question]) -> dict[str, Any]:
        article = qs[0].article
        values = {
            "unit": article.id,
            "article": _article_text(article.row["text"], config),
            "publish_date": _date_label(article.day),
        }
        for q in qs:
            values[f"question_{q.index}"], values[f"answer_{q.index}"] = q.question, q.answer
        return values

    out = _run_stage(runner, stage, units, variables)
    for qs, row in zip(units, out, strict=True):
        for q in qs:
            if not q.alive:
                continue
            if not row["parse_ok"]:
                q.rejection = _failure("filter", row)
                continue
            k = q.index - 1
            q.filter_raw = row["filter_blocks"][k]
            if row["filter_scores"][k] is None:
                q.rejection = _reject(
                    "filter", "filter_scores_invalid", row["filter_errors"][k], q.filter_raw
                )
                continue
            q.scores = row["filter_scores"][k]
            if not keep(q.scores):
                q.rejection = _reject(
                    "filter", "filter_total_below_13", f"total {sum(q.scores)}: {q.scores}", q.filter_raw
                )


def _categorise(runner: StageRunner, stage: LLMStage, kept: list[_Question]) -> None:
    """The category of each kept question. A failed request, or a distribution with no
    probability on any label (it would resolve to a uniform tie, i.e. the first label), falls
    back to ``Other`` with the reason in ``category_fallback``."""
    out = _run_stage(runner, stage, kept, lambda q: {"unit": q.id, "question": q.question})
    for q, row in zip(kept, out, strict=True):
        if row["parse_ok"] and row["option_mass"]:
            q.category = normalise_category(row["raw_text"])
            q.category_prob = max(row["option_probs"])
            continue
        q.category, q.category_prob = OTHER, None
        q.category_fallback = _error_kind(row) if not row["parse_ok"] else "no_label_mass"
        detail = row["parse_error"] if not row["parse_ok"] else "no probability on any label"
        log.warning("category of %s falls back to %s: %s", q.id, OTHER, detail)


def _reconcile(articles: list[_Article], questions: list[_Question]) -> list[RunSummary]:
    """Article and question accounting; raises if any count does not reconcile."""
    arts = RunSummary(name=f"{NAME}/articles")
    arts.rows_read = len(articles)
    for a in articles:
        if a.rejection:
            arts.reject(a.rejection["reason"])
        else:
            arts.rows_written += 1
    qs = RunSummary(name=f"{NAME}/questions")
    qs.rows_read = 4 * arts.rows_written
    for q in questions:
        if q.rejection:
            qs.reject(q.rejection["reason"])
        else:
            qs.rows_written += 1
    fallbacks = Counter(q.category_fallback for q in questions if q.alive and q.category_fallback)
    qs.metrics.update({f"category_other_{reason}": n for reason, n in sorted(fallbacks.items())})
    for s in (arts, qs):
        s.finish()
        if not s.reconciles:
            raise AssertionError(f"{s.name}: counts do not reconcile\n{s.table()}")
    return [arts, qs]


# ------------------------------------------------------------------ outputs
def _kept_rows(
    questions: list[_Question], config: Config, versions: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The TF and MC rows of the live questions. A row that breaks the benchmark's invariants
    (``questions.output_problems``) rejects its question (``invariant_violation``) instead."""
    tf, mc = [], []
    for q in questions:
        if not q.alive:
            continue
        row = _question_row(q, config, versions)
        problems = output_problems(row, q.is_mc)
        if problems:
            log.warning("question %s breaks the output invariants: %s", q.id, problems)
            q.rejection = _reject("output", "invariant_violation", "; ".join(problems), q.filter_raw)
        else:
            (mc if q.is_mc else tf).append(row)
    return tf, mc


def _question_row(q: _Question, config: Config, versions: str) -> dict[str, Any]:
    """The output row of a kept question (``tables.TF_SCHEMA`` or ``MC_SCHEMA``)."""
    a = q.article
    row = {
        "question_id": q.id,
        "question_index": q.index,
        "question": q.question,
        "category": q.category,
        "category_prob": q.category_prob,
        "time_element": q.time.phrase,
        "time_element_end": q.time.end,
        "filter_scores": q.scores,
        "filter_total": sum(q.scores),
        "filter_raw": q.filter_raw,
        "article_id": a.id,
        "url": a.row["url"],
        "domain": a.row["host"],
        "title": a.row["title"],
        "text": a.row["text"],
        "published_at": a.row["published_at"],
        "selection": a.pick.selection,
        "summary": a.summary,
        "keypoint": a.keypoint,
        "model": config.llm.model,
        "prompt_versions": versions,
        "date": a.day,
    }
    if not q.is_mc:
        return {**row, "answer": q.answer}
    choices, gold = shuffle_options(q.answer, q.distractors, config.seed, q.id)
    return {
        **row,
        "answer": LETTERS[gold],
        "answer_text": q.answer,
        **{f"choice_{letter}": c for letter, c in zip(LETTERS, choices, strict=True)},
        "mc_stem": mc_stem(q.question),
    }


def _tables(
    articles: list[_Article], questions: list[_Question], tf: list[dict[str, Any]], mc: list[dict[str, Any]]
) -> dict[str, pa.Table]:
    """This run's four tables: the selection, the kept TF and MC rows and every rejection."""
    selection = [
        {
            "article_id": a.id,
            "url": a.row["url"],
            "domain": a.row["host"],
            "title": a.row["title"],
            "published_at": a.row["published_at"],
            "selection": a.pick.selection,
            "draw_seed": a.pick.draw_seed,
            "cluster_id": a.pick.cluster_id,
            "cluster_size": a.pick.cluster_size,
            "cluster_mean_dist": a.pick.cluster_mean_dist,
            "day_articles": a.day_articles,
            "date": a.day,
        }
        for a in articles
    ]
    rejected = [_rejected_row(a, None) for a in articles if a.rejection]
    rejected += [_rejected_row(q.article, q) for q in questions if q.rejection]
    return {
        "selection": pa.Table.from_pylist(selection, schema=SELECTION_SCHEMA),
        "tf_questions": pa.Table.from_pylist(tf, schema=TF_SCHEMA),
        "mc_questions": pa.Table.from_pylist(mc, schema=MC_SCHEMA),
        "rejected": pa.Table.from_pylist(rejected, schema=REJECTED_SCHEMA),
    }


def _rejected_row(a: _Article, q: _Question | None) -> dict[str, Any]:
    rejection = (q or a).rejection
    return {
        "unit": "question" if q else "article",
        **{k: rejection[k] for k in ("stage", "reason", "detail", "raw_text")},
        "article_id": a.id,
        "url": a.row["url"],
        "title": a.row["title"],
        "selection": a.pick.selection,
        "keypoint": a.keypoint,
        "question_id": q.id if q else None,
        "question_index": q.index if q else None,
        "question": q.question if q else None,
        "answer": q.answer if q else None,
        "distractors": q.distractors if q else None,
        "filter_scores": q.scores if q else None,
        "date": a.day,
    }


def _write_days(root: str, days: list[dt.date], tables: dict[str, pa.Table]) -> None:
    """Replace exactly the pending days' partitions of every table; other days stay untouched."""
    for name, table in tables.items():
        uri = benchmark_uri(root, NAME, name)
        for day in days:
            storage.delete(storage.join(uri, f"date={day.isoformat()}"))
        if table.num_rows:
            write_benchmark_table(root, NAME, name, table, partition_cols=("date",), replace="partitions")


def _day_counts(
    day: dt.date, articles: list[_Article], questions: list[_Question], prefiltered: dict[str, Any]
) -> dict[str, Any]:
    arts = [a for a in articles if a.day == day]
    qs = [q for q in questions if q.article.day == day]
    kept = [q for q in qs if q.alive]
    rejections = [x.rejection["reason"] for x in [*arts, *qs] if x.rejection is not None]
    fallbacks = Counter(q.category_fallback for q in kept if q.category_fallback)
    return {
        "date": day.isoformat(),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "prefilter": prefiltered,
        "selected": len(arts),
        "selected_by_kind": dict(Counter(a.pick.selection for a in arts)),
        "rejected_articles": sum(a.rejection is not None for a in arts),
        "questions_generated": len(qs),
        "tf": sum(not q.is_mc for q in kept),
        "mc": sum(q.is_mc for q in kept),
        "rejected_questions": len(qs) - len(kept),
        "rejected_by_reason": dict(Counter(rejections)),
        "category_fallbacks": dict(fallbacks),
        "engine_errors": sum(map(_is_engine_error, rejections)) + fallbacks["engine_error"],
    }


def read_table(root: str, name: str) -> pa.Table:
    """One output table over every built day."""
    return storage.read_table(benchmark_uri(root, NAME, name), TABLES[name], partition_cols=("date",))


def _eval_items(tf: pa.Table, mc: pa.Table) -> list[dict[str, Any]]:
    """Every kept question as an evaluation item: the forecaster's cutoff is 00:00 UTC of the day
    before resolution (accessible documents are dated before d_res − 1, spec §5)."""
    items = []
    for task, table in (("tf", tf), ("mc", mc)):
        for r in table.to_pylist():
            resolve = dt.datetime(r["date"].year, r["date"].month, r["date"].day, tzinfo=dt.UTC)
            if task == "tf":
                choices, gold = list(YES_NO), YES_NO.index(r["answer"])
            else:
                choices, gold = [r[f"choice_{x}"] for x in LETTERS], LETTERS.index(r["answer"])
            items.append(
                {
                    "item_id": r["question_id"],
                    "benchmark": NAME,
                    "task": task,
                    "split": "test",
                    "type": "yesno" if task == "tf" else "mc",
                    "question": r["question"],
                    "choices": choices,
                    "gold_index": gold,
                    "t_cut": resolve - dt.timedelta(days=1),
                    "t_resolve": resolve,
                    "gold_article_ids": [r["article_id"]],
                    "category": r["category"],
                    "source_id": r["question_id"],
                }
            )
    return items


def _day_markers(root: str) -> dict[str, dict[str, Any]]:
    """The counts of every day marked done, by ISO date."""
    per_day = {}
    for marker in storage.list_files(storage.join(root, NAME, "days"), storage.MARKER):
        counts = storage.read_json(marker)
        per_day[counts["date"]] = {k: v for k, v in counts.items() if k != "date"}
    return per_day


def _outputs_current(root: str) -> bool:
    """Whether eval_items and the dataset card exist and the card covers exactly the marked days
    (a run stopped between marking its days and writing these leaves them behind)."""
    card_uri = benchmark_uri(root, NAME, "dataset_card.json")
    if not (storage.exists(card_uri) and storage.exists(benchmark_uri(root, NAME, "eval_items"))):
        return False
    return set(storage.read_json(card_uri)["counts"]["per_day"]) == set(_day_markers(root))


def _write_outputs(
    config: Config,
    runner: StageRunner,
    built: list[dt.date],
    skipped: list[dt.date],
    unmarked: dict[dt.date, str],
) -> dict[str, Any]:
    """Evaluation items and the dataset card over every day on disk (per-day counts: marked days)."""
    tf, mc = read_table(config.root, "tf_questions"), read_table(config.root, "mc_questions")
    write_eval_items(config.root, NAME, _eval_items(tf, mc))
    per_day = _day_markers(config.root)
    per_category = {
        c: {
            "tf": int(pc.sum(pc.equal(tf["category"], c)).as_py() or 0),
            "mc": int(pc.sum(pc.equal(mc["category"], c)).as_py() or 0),
        }
        for c in CATEGORIES
    }
    reasons: Counter = Counter()
    for counts in per_day.values():
        reasons.update(counts["rejected_by_reason"])
    counts = {
        "days": len(per_day),
        "days_built_this_run": [d.isoformat() for d in built],
        "days_skipped_this_run": [d.isoformat() for d in skipped],
        "days_not_marked_this_run": {d.isoformat(): reason for d, reason in sorted(unmarked.items())},
        "tf_questions": tf.num_rows,
        "mc_questions": mc.num_rows,
        "per_day": dict(sorted(per_day.items())),
        "per_category": per_category,
        "mc_stems": dict(Counter(mc["mc_stem"].to_pylist())),
        "rejected_by_reason": dict(reasons.most_common()),
    }
    return write_card(config.root, NAME, runner, counts, config)
