"""Daily Oracle with the embedded Gemma 3 270M base model on the real sample news.

Every generate stage asks for its declared answer form, fitted to the run's token cap, so the
base model's summaries and question sets parse: the build must generate questions (the
candidates the seven-principle filter judges) and every answer of the summary, qa and
distractors stages must validate against the form its stage sent. The cap is too small for the
filter's form (its 28 headings alone take about 340 tokens), so its answers are cut and end as
rejected rows with reasons; counts reconcile and a rerun sends no request."""

import datetime as dt
import json

import pytest

from pipelines.daily_oracle import Config, run
from pipelines.daily_oracle.articles import select_articles
from pipelines.daily_oracle.outputs import read_table
from pipelines.daily_oracle.stages import QA_FORM
from pipelines.llm.attempts import answer_budget, below_cap
from pipelines.llm.config import LLMConfig
from udfs import storage
from udfs.daily_oracle import outputs
from udfs.daily_oracle.questions import output_problems
from udfs.llm_parsing import check_output
from udfs.prompts import load_prompt
from udfs.quality import question_problems

pytestmark = [pytest.mark.llm, pytest.mark.ray, pytest.mark.spark]

D18 = dt.date(2022, 9, 18)
CAP = 128  # room for a summary, a question set and the distractors; not for the filter's form
LLM = LLMConfig()  # the default engine actor, shared with the other local-model tests
WORDS = 40  # the filter prompt is ~1,850 tokens before the article and the questions; the engine takes 2,048
STEPS = ["summary", "qa", "distractors", "filter", "category"]


def _stage_rows(root: str, stage: str) -> list[dict]:
    return storage.read_table(storage.join(root, "daily_oracle", stage, "output")).to_pylist()


def test_the_local_model_writes_questions_whose_answers_validate(root_with_corpus, ray_local):
    cfg = Config(
        root=root_with_corpus,
        dates=(D18,),
        publishers=("npr.org", "chicago.suntimes.com", "abc7.com"),
        n_random=1,
        n_hot=0,
        llm=LLM.replace(max_new_tokens=CAP),
        article_words=WORDS,
    )
    result = run(cfg)
    by_name = {s.name.split("/")[1]: s for s in result.summaries}
    assert [n for n in by_name if n in STEPS] == STEPS
    assert all(s.reconciles for s in result.summaries)
    assert by_name["select"].rows_written == 1 == by_name["summary"].rows_read

    # the candidates: the article's question set, before the filter judges it
    qa_rows = _stage_rows(root_with_corpus, "qa")
    assert len(qa_rows) == 1 and all(r["parse_ok"] for r in qa_rows)
    assert by_name["questions"].rows_read == 4
    for stage in ("summary", "qa", "distractors"):
        for row in _stage_rows(root_with_corpus, stage):
            sent = below_cap(row["prompt_id"], outputs.fitted)(answer_budget(row["prompt_id"], CAP))
            form = json.loads(row[QA_FORM]) if stage == "qa" else sent
            check_output(form or load_prompt(row["prompt_id"]).output, row["raw_text"])
            assert row["parse_ok"] and row["model"] == "gemma-3-270m", (stage, row["parse_error"])
    for row in _stage_rows(root_with_corpus, "filter"):  # cut by the cap: a parse failure, no engine error
        assert row["parse_ok"] or row["parse_error"].startswith("parse: "), (
            row["input_tokens"],
            row["parse_error"],
        )

    rejected = read_table(root_with_corpus, "rejected").to_pylist()
    kept = (
        read_table(root_with_corpus, "tf_questions").to_pylist()
        + read_table(root_with_corpus, "mc_questions").to_pylist()
    )
    questions, quality = by_name["questions"], by_name["quality"]
    assert sum(r["unit"] == "question" for r in rejected) == questions.rows_rejected
    assert questions.rows_written == questions.rows_read - questions.rows_rejected == quality.rows_read
    # the quality gate: what the filter kept either passes the question checks or is a quality_* row
    gated = [r for r in rejected if r["stage"] == "quality"]
    assert len(gated) == quality.rows_rejected and all(r["reason"].startswith("quality_") for r in gated)
    assert len(kept) == quality.rows_written == quality.rows_read - quality.rows_rejected
    assert all(r["reason"] and r["stage"] for r in rejected)
    for row in kept:
        assert output_problems(row, "choice_a" in row) == []
        assert question_problems(row["question"]) == []

    again = run(cfg)
    assert again.details["days_skipped"] == [D18] and again.requests_computed == 0
    selected = read_table(root_with_corpus, "selection").to_pylist()
    picks, _ = select_articles(cfg, [D18])
    assert sorted((r["article_id"], r["selection"], r["draw_seed"]) for r in selected) == sorted(
        (a.id, a.pick.selection, a.pick.draw_seed) for a in picks
    )
