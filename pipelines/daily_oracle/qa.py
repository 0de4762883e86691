"""Steps 2–4: the summary and keypoint of each picked article, its four questions (then the
checks that need no model) and the distractors of its two MC questions.

Each step (``pipelines.builders.Step``) is one batched pass over every pending day's live units;
a unit whose row failed or broke a rule gets its ``Rejection`` and leaves the later steps.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pipelines.builders import Build
from pipelines.daily_oracle.config import NAME, Config
from pipelines.daily_oracle.stages import QA_FORM, failure, qa_form, run_stage
from pipelines.daily_oracle.state import State
from udfs.daily_oracle.parsing import is_no_new_event
from udfs.daily_oracle.questions import clean_question, distractor_problem
from udfs.daily_oracle.rows import date_label
from udfs.daily_oracle.units import Article, Question, Rejection, check_question
from udfs.text import first_words


def article_text(article: Article, config: Config) -> str:
    """The article as the model sees it (cut after ``--article-words`` words)."""
    return first_words(article.row["text"], config.article_words)


def summarise(b: Build[Config], s: State) -> None:
    """The summary and the new-event keypoint; an article without a new event drops out."""
    out = run_stage(
        b.ledger,
        "summary",
        s.articles,
        lambda a: {"unit": a.id, "article": article_text(a, b.config), "publish_date": date_label(a.day)},
    )
    for article, row in zip(s.articles, out, strict=True):
        if not row["parse_ok"]:
            article.rejection = failure("summary", row)
        elif is_no_new_event(row["keypoint"]):
            article.rejection = Rejection("summary", "no_new_event", row["keypoint"], row["raw_text"])
        else:
            article.summary, article.keypoint = row["summary"], row["keypoint"]


def generate_questions(b: Build[Config], s: State) -> None:
    """Four questions per article with a keypoint, then the checks that need no model
    (``units.check_question``); ``s.questions``: every question of every article with four
    parsed pairs (rejected ones included, with their reason)."""
    active = [a for a in s.articles if a.rejection is None]
    budget = b.ledger.budget(f"{NAME}.qa")
    out = run_stage(
        b.ledger,
        "qa",
        active,
        lambda a: {
            "unit": a.id,
            "article": article_text(a, b.config),
            "publish_date": date_label(a.day),
            "keypoint": a.keypoint,
            "month_year": a.day.strftime("%B %Y"),
            QA_FORM: qa_form(a.day.strftime("%B %Y"), budget),
        },
    )
    questions: list[Question] = []
    for article, row in zip(active, out, strict=True):
        if not row["parse_ok"]:
            article.rejection = failure("qa", row)
            continue
        for index, (text, answer) in enumerate(zip(row["questions"], row["answers"], strict=True), start=1):
            q = Question(article, index, clean_question(text), answer.strip())
            q.rejection = check_question(q, row["raw_text"])
            article.questions.append(q)
            questions.append(q)
    s.questions = questions


def add_distractors(b: Build[Config], s: State) -> None:
    """Three wrong options per MC question: one request per article with a live MC question (the
    prompt always shows both)."""
    by_article: dict[str, list[Question]] = defaultdict(list)
    for q in s.questions:
        if q.is_mc:
            by_article[q.article.id].append(q)
    units = [pair for pair in by_article.values() if any(q.alive for q in pair)]

    def variables(pair: list[Question]) -> dict[str, Any]:
        return {
            "unit": pair[0].article.id,
            "article": article_text(pair[0].article, b.config),
            "question_1": pair[0].question,
            "answer_1": pair[0].answer,
            "question_2": pair[1].question,
            "answer_2": pair[1].answer,
        }

    out = run_stage(b.ledger, "distractors", units, variables)
    for pair, row in zip(units, out, strict=True):
        for k, q in enumerate(pair):
            if not q.alive:
                continue
            if not row["parse_ok"]:
                q.rejection = failure("distractors", row)
                continue
            q.distractors = row["distractors"][3 * k : 3 * k + 3]
            problem = distractor_problem(q.answer, q.distractors)
            if problem:
                q.rejection = Rejection("distractors", problem[0], problem[1], row["raw_text"])
