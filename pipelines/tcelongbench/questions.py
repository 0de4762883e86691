"""S6 and S8 — detail and forecast questions: generation and the question rules, the Evidence
check, Background 2 and the (b)(c)(d) distractors, the Plausible check and the voted Forecasting
check. Detail questions come from days 1..n-1 only, forecast questions from day n; Background 2
never comes from day n (asserted)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from pipelines.builders import Build
from pipelines.llm.ledger import Ledger
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.stages import FORECAST_FORM, llm_stages
from pipelines.tcelongbench.state import State
from udfs.embeddings import embed
from udfs.ids import stable_id, stable_seed
from udfs.llm_rows import OUTPUT_COLUMNS
from udfs.report import RunSummary
from udfs.tcelongbench import outputs, qa, verify
from udfs.tcelongbench.tables import DETAIL, FORECAST


def parsed(out: pa.Table) -> list[dict[str, Any]]:
    """The parsed rows of a stage's output, without the contract columns (the provenance stays
    in the stage output)."""
    return [{k: v for k, v in r.items() if k not in OUTPUT_COLUMNS} for r in out.to_pylist() if r["parse_ok"]]


def drop_question(
    ledger: Ledger, step: RunSummary, reason: str, q: dict[str, Any], detail: str | None = None
) -> None:
    """Record a question (or order problem) dropped by a builder step."""
    ledger.drop(step, reason, unit="question", item_id=q["qa_id"], parent_id=q["tce_id"], detail=detail)


def generate(b: Build[Config], s: State) -> None:
    """One question per kept point (``s.questions``): detail from days 1..n-1, forecast from day
    n. No question may repeat a few-shot example of its prompt; forecast questions must pass the
    hard rules (opener, Day present, no "before")."""
    ledger, events, stages = b.ledger, s.events, llm_stages(b.config)

    def row(p: dict[str, Any], task: str) -> dict[str, Any]:
        if task == DETAIL and p["date"] > events.by_id[p["tce_id"]]["dates"][-2]:
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
            "article": events.text(p["gold_article_id"]),
            "day": p["date"].isoformat(),
        }

    last = {t["tce_id"]: t["n"] for t in events.tces}
    forecast_tokens = ledger.budget(stages["forecast_qa"].prompt_id)
    found = []
    for task in (DETAIL, FORECAST):
        rows = [row(p, task) for p in s.kept if (p["k"] == last[p["tce_id"]]) == (task == FORECAST)]
        if task == FORECAST:  # the declared form holds the row's own day
            rows = [{**r, FORECAST_FORM: outputs.forecast_output(forecast_tokens, r["day"])} for r in rows]
        out = ledger.run(
            stages[f"{task}_qa"], rows, unit="question", id_column="qa_id", parent_column="tce_id"
        )
        found += parsed(out)
    templates = {task: stages[f"{task}_qa"].prompt.user_template for task in (DETAIL, FORECAST)}
    step = ledger.step("question_rules")
    passing = []
    for q in found:
        problems = ["copied_example"] if qa.copied_example(q["question"], templates[q["task"]]) else []
        if q["task"] == FORECAST:
            problems += qa.forecast_question_problems(q["question"], q["day"])
        if problems:
            reason = f"{q['task']}_" + "+".join(problems)
            drop_question(ledger, step, reason, q, q["question"])
        else:
            ledger.keep(step)
            passing.append(q)
    ledger.close(step)
    s.questions = passing


def verify_evidence(b: Build[Config], s: State) -> None:
    """The Evidence check: keep a question only on the affirmative verdict (and, with
    ``evidence_min_match``, only if the quoted sentence matches the article)."""
    config, ledger = b.config, b.ledger
    stage = llm_stages(config)["evidence"]
    out = parsed(ledger.run(stage, s.questions, unit="question", id_column="qa_id", parent_column="tce_id"))
    step = ledger.step("evidence_verdict")
    passing = []
    for q in out:
        match = qa.evidence_match(q["evidence_sentence"], q["article"])
        if not q["evidence_pass"]:
            reason = "answer_may_be_wrong"
        elif config.evidence_min_match is not None and match < config.evidence_min_match:
            reason = "evidence_not_in_article"
        else:
            ledger.keep(step)
            passing.append({**q, "evidence_match": match})
            continue
        drop_question(ledger, step, reason, q, q["evidence_sentence"])
    ledger.close(step)
    s.questions = passing


def add_distractors(b: Build[Config], s: State) -> None:
    """Draw Background 2 (an article of another day among 1..n-1) and ask for the (b)(c)(d)
    distractors; ``s.questions``: those with their four choices (correct first)."""
    config, ledger, events = b.config, b.ledger, s.events
    step = ledger.step("background2")
    rows = []
    for q in s.questions:
        t = events.by_id[q["tce_id"]]
        by_day = {k: events.members[(q["tce_id"], k)] for k in range(1, t["n"] + 1)}
        seed = stable_seed(config.seed, "background2", q["qa_id"])
        pick = qa.pick_background(by_day, q["k"], range(1, t["n"]), seed)
        if pick is None:
            drop_question(ledger, step, "no_other_day_before_last", q)
            continue
        k2, article2 = pick
        if t["dates"][k2 - 1] >= t["dates"][-1]:
            raise AssertionError(f"{q['qa_id']}: Background 2 from the last day")
        ledger.keep(step)
        rows.append(
            {
                **q,
                "background1": q["article"],
                "background2": events.text(article2),
                "background2_article_id": article2,
                "background2_date": t["dates"][k2 - 1],
            }
        )
    ledger.close(step)
    stage = llm_stages(config)["distractors"]
    out = ledger.run(stage, rows, unit="question", id_column="qa_id", parent_column="tce_id")
    s.questions = [
        {
            **q,
            "choices": [q["answer"], q["distractor_b"], q["distractor_c"], q["distractor_d"]],
            "choice_types": ["correct", *qa.DISTRACTOR_TYPES],
        }
        for q in parsed(out)
    ]


def check_plausible(b: Build[Config], s: State) -> None:
    """The Plausible check on every question's four choices."""
    config, ledger = b.config, b.ledger
    step = ledger.step("plausible")
    passing = []
    vectors = embed([c for q in s.questions for c in q["choices"]], config.encoder)
    for i, q in enumerate(s.questions):
        block = vectors[4 * i : 4 * i + 4]
        problems = qa.plausible_problems(
            q["choices"],
            block @ block.T,
            config.plausible_mode,
            config.plausible_max_word_spread,
            config.plausible_max_cosine,
        )
        if problems:
            reason = "plausible_" + "+".join(problems)
            drop_question(ledger, step, reason, q, " | ".join(q["choices"]))
        else:
            ledger.keep(step)
            passing.append(q)
    ledger.close(step)
    s.questions = passing


def tally(
    config: Config, ledger: Ledger, name: str, check: str, items: list[dict[str, Any]], out: pa.Table
) -> list[dict[str, Any]]:
    """Aggregate the voting rounds of each item (an unparseable round fails); the passing items
    get their ``votes`` and ``votes_passed``."""
    rounds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in out.to_pylist():
        rounds[row["qa_id"]].append(row)
    step = ledger.step(name)
    passing = []
    for item in items:
        got = sorted(rounds[item["qa_id"]], key=lambda r: r["sample_index"])
        passes = [r["parse_ok"] and verify.round_passes(check, r["q1"], r["q2"]) for r in got]
        votes = [f"{r['q1']}{r['q2']}" if r["parse_ok"] else "--" for r in got]
        n_pass = sum(passes)
        if verify.vote(passes, config.verify_min_pass):
            ledger.keep(step)
            passing.append({**item, "votes": votes, "votes_passed": n_pass})
        else:
            drop_question(ledger, step, f"votes_{n_pass}_of_{len(got)}", item, ",".join(votes))
    ledger.close(step)
    return passing


def vote_forecasts(b: Build[Config], s: State) -> None:
    """S8, the Forecasting check: ``verify_rounds`` sampled rounds per forecast question, majority
    rule; ``s.mc_questions``: the detail questions and the forecast questions that pass."""
    forecasts = [q for q in s.questions if q["task"] == FORECAST]
    rows = [
        {"qa_id": q["qa_id"], "tce_id": q["tce_id"], "question": q["question"], "day": q["day"]}
        for q in forecasts
    ]
    stage = llm_stages(b.config)["forecast_votes"]
    out = b.ledger.run(stage, rows, unit="question", id_column="qa_id", parent_column="tce_id")
    voted = tally(b.config, b.ledger, "forecast_votes_tally", verify.FORECASTING, forecasts, out)
    s.mc_questions = [q for q in s.questions if q["task"] == DETAIL] + voted
