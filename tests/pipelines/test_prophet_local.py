"""The PROPHET builder with the real embedded model (logprob estimator) on real ForecastBench
questions and the real CC-NEWS sample articles: every stage completes, the model's bad answers
become rejected rows with reasons, counts reconcile, and no evidence row is dated on or after its
question's cutoff. Tiny budget: 2 questions, N = 4, K_max = 2, 12 generated tokens per query list."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import read_rejected
from pipelines.llm.stage import StageRunner
from pipelines.prophet.build import run
from pipelines.prophet.config import Config
from pipelines.prophet.stages import cil_stages
from udfs import storage
from udfs.prophet.cil import EvidenceArticle
from udfs.prophet.layout import PromptArticle, snippet
from udfs.prophet.plan import assemble, plan_question
from udfs.prophet.requests import plan_requests, term_values
from udfs.schemas import ARTICLES

pytestmark = [pytest.mark.llm, pytest.mark.ray, pytest.mark.spark]

# For D = 2024-07-28 the 2022-09-15/16 articles fall in bin 68 and the 2022-09-18 ones in bin 67, so
# bin 67 has a non-empty window; for D = 2024-08-20 every sample article is in bin 70 (K = 0).
QUESTION_IDS = ("IHLIDXUS@2024-07-28", "NASDAQ100@2024-08-20")
LLM_STAGES = ("query_entities", "query_steps", "query_similar", "relevance", "joint", "conditional")


def forecastbench_files(shared_data: Path) -> tuple[str, str]:
    """The real ForecastBench question set and its resolutions."""
    questions = shared_data / "questions"
    return (
        str(questions / "forecastbench_2024-07-21-human.json"),
        str(questions / "forecastbench_2024-07-21_resolution_set.json"),
    )


def test_logprob_build_on_real_questions_and_articles(ray_local, root_with_corpus, shared_data):
    config = Config(
        root=root_with_corpus,
        forecastbench=forecastbench_files(shared_data),
        question_ids=QUESTION_IDS,
        llm=LLMConfig(batch_size=8, max_new_tokens=12),
        estimator="logprob",
        rating="score",
        num_queries=2,
        search_depth=4,
        top_n=4,
        k_max=2,
        context_words=30,
        rating_words=40,
        cil_words=20,
    )
    result = run(config)
    names = {s.name for s in result.summaries}
    assert {f"prophet/{s}" for s in LLM_STAGES} <= names
    assert all(s.reconciles for s in result.summaries)
    for stage in LLM_STAGES:
        assert storage.is_done(storage.join(root_with_corpus, "prophet", stage))

    t = result.tables
    evidence = t["evidence"].to_pylist()
    assert evidence, "the real model kept no evidence; the cutoff check below would be vacuous"
    questions_out = {q["question_id"]: q for q in t["questions"].to_pylist()}
    assert set(questions_out) == set(QUESTION_IDS)
    for e in evidence:
        cutoff = dt.datetime.combine(
            questions_out[e["question_id"]]["resolution_date"], dt.time(0, tzinfo=dt.UTC)
        )
        assert e["published_at"] < cutoff
    assert all(e["rank"] <= 4 and 2 <= e["rating"] <= 6 for e in evidence)

    rejected = read_rejected(root_with_corpus, "prophet").to_pylist()
    assert all(d["reason"] and d["stage"] for d in rejected)
    by_stage = {s.name.removeprefix("prophet/"): s for s in result.summaries}
    for stage in ("query_entities", "query_steps", "query_similar", "relevance", "joint", "conditional"):
        failed = [d for d in rejected if d["stage"] == stage]  # every failed row, with its reason
        assert len(failed) == by_stage[stage].rows_rejected
        assert all(d["detail"] for d in failed)

    cil = t["cil"].to_pylist()
    assert len(cil) == len(evidence)
    assert all(r["status"] == "ok" and -1 <= r["cil"] <= 1 for r in cil)
    assert t["joint_tables"].num_rows == by_stage["joint"].rows_read
    for q in questions_out.values():
        assert q["split"] in ("L1", "L2", "none") and q["llm_requests"] > 0
    assert t["eval_items"].num_rows == 2


def test_windowed_cil_terms_on_the_local_model(ray_local, root_with_corpus):
    """Which articles the end-to-end run keeps depends on the base model's queries, so the
    windowed case is driven here directly: one real article in bin 68 and two in bin 67 of
    D = 2024-07-28 give bin 67 a window of K = 1, and the real model answers every joint and
    conditional term of the logprob estimator."""
    articles = ARTICLES.read(root_with_corpus, columns=["article_id", "title", "text", "published_at"])
    rows = sorted(
        (r for r in articles.to_pylist() if r["published_at"] is not None), key=lambda r: r["published_at"]
    )
    picked = [rows[0], *[r for r in rows if r["published_at"].date() == dt.date(2022, 9, 18)][:2]]
    evidence = [EvidenceArticle(r["article_id"], r["published_at"], 4) for r in picked]
    plan = plan_question("q", dt.date(2024, 7, 28), evidence, w=3, k_max=2)
    assert sorted(w.k for w in plan.windows.values()) == [0, 1]

    config = Config(
        root=root_with_corpus, questions="unused", estimator="logprob", llm=LLMConfig(batch_size=8)
    )
    shown = {
        r["article_id"]: PromptArticle(
            r["published_at"].date().isoformat(), snippet(r["title"], r["text"], 20)
        )
        for r in picked
    }
    joint_stage, conditional_stage = cil_stages(
        config, shown, {"q": "Will US job postings be higher on 2024-07-28?"}
    )
    joints, conditionals = plan_requests({"q": plan})
    runner = StageRunner(root_with_corpus, "prophet_probe", config.llm)
    joint_out = runner.run(joint_stage, joints)
    conditional_out = runner.run(conditional_stage, conditionals)
    assert joint_out.num_rows == 2 and conditional_out.num_rows == 2 * 2 * 2 + 1 * 2 * 1
    assert all(joint_out.column("parse_ok").to_pylist() + conditional_out.column("parse_ok").to_pylist())

    joint_values = term_values([joint_out], lambda r: (tuple(r["window_ids"]), r["bits"]), 1, "logprob")
    conditional_values = term_values(
        [conditional_out], lambda r: (r["article_id"], r["x"], r["bits"]), 1, "logprob"
    )
    cil_rows, joint_rows = assemble(
        plan,
        1,
        {k[1:]: v for k, v in joint_values.items()},
        {k[1:]: v for k, v in conditional_values.items()},
    )
    assert [r["status"] for r in cil_rows] == ["ok"] * 3 and all(-1 <= r["cil"] <= 1 for r in cil_rows)
    assert len(joint_rows) == 2 and abs(sum(r["pi"] for r in joint_rows) - 1) < 1e-9
