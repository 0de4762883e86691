"""PROPHET's declared answer forms with the real embedded model, at the demo's budget of 16 new
tokens: the query stages give a non-empty candidate table (generated queries and the articles
they retrieve) before the relevance filter, every answer the stages kept validates against the
declared form it was sent with, and the generated relevance ratings and verbalized CIL terms
(``*0.xx*``) parse. One question, two queries per prompt, a handful of requests per stage."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.llm.attempts import fit
from pipelines.llm.config import LLMConfig
from pipelines.llm.stage import LLMStage, StageRunner
from pipelines.prophet.build import run
from pipelines.prophet.config import Config
from pipelines.prophet.stages import cil_stages, query_stage, relevance_stage
from tests.pipelines.test_prophet_local import forecastbench_files
from udfs import storage
from udfs.llm_parsing import check_output
from udfs.prophet.cil import EvidenceArticle
from udfs.prophet.layout import PromptArticle, snippet
from udfs.prophet.plan import plan_question
from udfs.prophet.requests import plan_requests
from udfs.schemas import ARTICLES

pytestmark = [pytest.mark.llm, pytest.mark.ray, pytest.mark.spark]


def stage_output(root: str, stage: str) -> list[dict]:
    return storage.read_table(storage.join(root, "prophet", stage, "output")).to_pylist()


def declared(stage: LLMStage, config: Config) -> dict:
    """The answer form the ledger sends with ``stage`` at ``config``'s token budget."""
    form = fit(stage, config.llm.max_new_tokens).structured
    assert form, f"{stage.name}: no answer form at {config.llm.max_new_tokens} tokens"
    return form


def validated(rows: list[dict], form: dict) -> list[dict]:
    """The kept rows, each re-checked against the stage's declared answer form."""
    kept = [r for r in rows if r["parse_ok"]]
    for r in kept:
        check_output(form, r["raw_text"])
    return kept


def test_generated_evidence_stages_keep_declared_answers(ray_local, root_with_corpus, shared_data):
    config = Config(
        root=root_with_corpus,
        forecastbench=forecastbench_files(shared_data),
        question_ids=("IHLIDXUS@2024-07-28",),
        llm=LLMConfig(batch_size=8, max_new_tokens=16),
        rating="generate",
        num_queries=2,
        search_depth=2,
        top_n=2,
        context_words=30,
        rating_words=30,
        evidence_only=True,
    )
    result = run(config)
    assert all(s.reconciles for s in result.summaries)
    by_stage = {s.name.removeprefix("prophet/"): s for s in result.summaries}
    for kind in ("entities", "steps", "similar"):
        stage = f"query_{kind}"
        rows = stage_output(root_with_corpus, stage)
        assert validated(rows, declared(query_stage(kind, config), config)), f"{stage}: no answer kept"
        assert by_stage[stage].rows_rejected == 0, f"{stage}: {[r['raw_text'] for r in rows]}"
    queries = result.tables["queries"].to_pylist()
    generated = [q for q in queries if q["query_type"] != "question"]
    assert generated, "only the fallback query: the candidate table would not come from the model"
    assert by_stage["retrieval"].metrics["candidates"] > 0  # the table the relevance filter reads
    ratings = stage_output(root_with_corpus, "relevance")
    assert len(validated(ratings, declared(relevance_stage(config, {}, {}), config))) == len(ratings) > 0
    assert all(1 <= r["rating"] <= 6 for r in ratings)


def test_verbalized_cil_terms_answer_in_the_declared_form(ray_local, root_with_corpus):
    """The verbalized estimator at 16 new tokens on one real article (K = 0: the two conditional
    terms, r = 2 each): sampled answers end in ``*0.xx*`` inside the budget."""
    articles = ARTICLES.read(root_with_corpus, columns=["article_id", "title", "text", "published_at"])
    first = min((r for r in articles.to_pylist() if r["published_at"]), key=lambda r: r["published_at"])
    plan = plan_question(
        "q", dt.date(2024, 7, 28), [EvidenceArticle(first["article_id"], first["published_at"], 4)], 3, 2
    )
    config = Config(
        root=root_with_corpus,
        questions="unused",
        estimator="verbalized",
        repeats=2,
        llm=LLMConfig(batch_size=8, max_new_tokens=16),
    )
    shown = {
        first["article_id"]: PromptArticle(
            first["published_at"].date().isoformat(), snippet(first["title"], first["text"], 20)
        )
    }
    joint_stage, conditional_stage = (
        fit(stage, config.llm.max_new_tokens)
        for stage in cil_stages(config, shown, {"q": "Will CBRE close higher on 2024-07-28?"})
    )
    joints, conditionals = plan_requests({"q": plan})
    runner = StageRunner(root_with_corpus, "prophet_verbalized", config.llm)
    joint_rows = runner.run(joint_stage, joints).to_pylist()
    conditional_rows = runner.run(conditional_stage, conditionals).to_pylist()
    rows = joint_rows + conditional_rows
    assert len(rows) == 2 * (joints.num_rows + conditionals.num_rows) >= 4
    assert joint_stage.structured == conditional_stage.structured
    kept = validated(rows, declared(joint_stage, config))
    assert len(kept) >= len(rows) - 1, [r["raw_text"] for r in rows]
    assert all(0 <= r["prob"] <= 1 for r in kept)
