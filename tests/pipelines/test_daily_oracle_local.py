"""Daily Oracle with the embedded Gemma 3 270M base model on the real sample news.

A base model of this size rarely follows the formats, so most candidates end as rejected rows
with reasons; what is checked is that every stage completes, that failures are rows (never
exceptions), that counts reconcile, that whatever is kept holds the structural checks, and that a
rerun sends no request. The pipeline's own stage definitions are also driven directly on real
articles, so the steps after the summary see the real model even when no keypoint survives."""

import datetime as dt

import pyarrow as pa
import pytest

from pipelines.daily_oracle import Config, run
from pipelines.daily_oracle.articles import select_articles
from pipelines.daily_oracle.outputs import read_table
from pipelines.daily_oracle.stages import STAGES
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import StageRunner
from udfs.daily_oracle.parsing import CATEGORIES
from udfs.daily_oracle.questions import output_problems
from udfs.text import first_words

pytestmark = [pytest.mark.llm, pytest.mark.ray, pytest.mark.spark]

D18 = dt.date(2022, 9, 18)
LLM = LLMConfig()  # the default engine actor, shared with the other local-model tests
WORDS = 100  # the filter prompt is ~1,850 tokens before the article; the engine takes 2,048
STEPS = ["summary", "qa", "distractors", "filter", "category"]


def test_every_stage_runs_on_the_local_model(root_with_corpus, ray_local):
    cfg = Config(
        root=root_with_corpus,
        dates=(D18,),
        publishers=("npr.org", "chicago.suntimes.com", "abc7.com"),
        n_random=1,
        n_hot=1,
        llm=LLM.replace(max_new_tokens=16),
        article_words=WORDS,
    )
    result = run(cfg)
    by_name = {s.name.split("/")[1]: s for s in result.summaries}
    assert [n for n in by_name if n in STEPS] == STEPS
    assert all(s.reconciles for s in result.summaries)
    assert by_name["select"].rows_written == 2 == by_name["summary"].rows_read
    assert by_name["summary"].metrics["requests_computed"] == 2

    rejected = read_table(root_with_corpus, "rejected").to_pylist()
    kept = (
        read_table(root_with_corpus, "tf_questions").to_pylist()
        + read_table(root_with_corpus, "mc_questions").to_pylist()
    )
    articles, questions = by_name["articles"], by_name["questions"]
    assert sum(r["unit"] == "article" for r in rejected) == articles.rows_rejected
    assert sum(r["unit"] == "question" for r in rejected) == questions.rows_rejected
    assert len(kept) == questions.rows_written == questions.rows_read - questions.rows_rejected
    assert all(r["reason"] and r["stage"] for r in rejected)
    assert all(r["raw_text"] is not None for r in rejected if r["reason"].endswith("parse_error"))
    for row in kept:
        assert output_problems(row, "choice_a" in row) == []

    again = run(cfg)
    assert again.days_skipped == [D18] and again.requests_computed == 0
    selected = read_table(root_with_corpus, "selection").to_pylist()
    picks, _ = select_articles(cfg, [D18])
    assert sorted((r["article_id"], r["selection"], r["draw_seed"]) for r in selected) == sorted(
        (a.id, a.pick.selection, a.pick.draw_seed) for a in picks
    )

    # the steps after the summary, each on one real article of the day with hand-written inputs
    # (prompt prefill dominates the cost on CPU, so one row per step)
    texts = {r["article_id"]: r["text"] for r in _articles(root_with_corpus)}
    article = first_words(texts[selected[0]["article_id"]], WORDS // 2)
    topic = selected[0]["title"].split(":")[0][:60]
    question = f"Will {topic} make news by September 2022?"
    base = {"article": [article], "publish_date": ["2022-09-18, Sunday"]}
    inputs = {
        "qa": {**base, "keypoint": [topic], "month_year": ["September 2022"]},
        "distractors": {
            "article": [article],
            "question_1": [f"Who will speak about {topic} in September 2022?"],
            "answer_1": ["The governor"],
            "question_2": [f"How many people will follow {topic} by September 2022?"],
            "answer_2": ["Thousands"],
        },
        "filter": {
            **base,
            **{f"question_{k}": [question] for k in range(1, 5)},
            **{f"answer_{k}": ["Yes"] for k in range(1, 5)},
        },
        "category": {"question": [question]},
    }
    runner = StageRunner(root_with_corpus, "daily_oracle_probe", cfg.llm)
    for name, columns in inputs.items():
        (row,) = runner.run(STAGES[name], pa.table(columns)).to_pylist()
        assert runner.summaries[-1].reconciles and runner.summaries[-1].metrics["requests_computed"] == 1
        assert row["parse_ok"] or row["parse_error"].startswith(("parse: ", "engine: "))
        assert row["model"] == "gemma-3-270m" and row["input_tokens"] > 0
    # category: a distribution over the 11 labels
    assert row["parse_ok"] and row["raw_text"] in CATEGORIES
    assert row["options"] == list(CATEGORIES) and abs(sum(row["option_probs"]) - 1) < 1e-9


def _articles(root: str) -> list[dict]:
    from udfs.schemas import ARTICLES

    return ARTICLES.read(root, columns=["article_id", "text"]).to_pylist()
