"""The PROPHET builder end to end with the scripted backend on a small synthetic corpus whose
dates are chosen to exercise every rule: two cutoffs, articles on and after D, an undated
article, a near-duplicate, rating-1 and below-top-N drops, a capped window, and verbalized
retries. The corpus is searched through its article index (``pipelines.index``), built after
the articles are written, as the demo does. A deterministic stand-in (a function of which articles happened, the focal article
and x, read back from the prompt variables) answers the CIL terms, so the stored CIL must equal
direct evaluation of the formula to 1e-12; request counts must equal the §6 formulas."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import pipelines.llm.backends as backends
from pipelines.index.engine import ArticleIndex
from pipelines.llm.ledger import read_rejected
from pipelines.prophet.build import run
from pipelines.prophet.config import Config
from pipelines.prophet.evidence import Corpus, searcher
from pipelines.prophet.plan import format_plan
from tests.pipelines.prophet_corpus import (
    ANSWERS,
    ARTICLE_DATES,
    D1,
    DATES,
    TOPIC,
    UTC,
    at,
    check_outputs,
    config,
    flaky,
    record_requests,
    scripted,
    write_corpus,
    write_questions,
)
from udfs import storage
from udfs.cli import InputError, parse
from udfs.prophet.plan import cost_formulas
from udfs.retrieval import Hit, LeakageError
from udfs.schemas import ARTICLES

pytestmark = [pytest.mark.ray]


@pytest.fixture(scope="module")
def built(ray_local, tmp_path_factory):
    """One logprob build on a fresh root (the other tests start from copies of it)."""
    base = tmp_path_factory.mktemp("prophet")
    root = str(base / "root")
    write_corpus(root)
    questions = write_questions(base / "questions.jsonl")
    return root, questions, run(config(root, questions, scripted(), estimator="logprob", rating="score"))


@pytest.fixture(scope="module")
def flaky_built(ray_local, tmp_path_factory):
    """One verbalized build with the ``flaky`` script on a fresh root."""
    base = tmp_path_factory.mktemp("prophet-flaky")
    root = str(base / "root")
    write_corpus(root)
    questions = write_questions(base / "questions.jsonl")
    with pytest.MonkeyPatch.context() as mp:
        record_requests(mp)
        result = run(config(root, questions, flaky(), estimator="verbalized", layout="grouped"))
    return root, questions, result


def llm_stages(result) -> dict[str, object]:
    return {s.name: s for s in result.summaries if "requests_total" in s.metrics}


def assert_plan_equals_the_run(plan, result) -> None:
    """A plan made after ``result``'s run was complete: exact, nothing to compute, the same LLM
    stages (retries included) and per question the run's request count."""
    planned, ran = llm_stages(plan), llm_stages(result)
    assert planned.keys() == ran.keys()
    assert all(s.metrics["requests_cached"] == s.metrics["requests_unique"] for s in planned.values())
    requests = {q["question_id"]: q["llm_requests"] for q in result.tables["questions"].to_pylist()}
    for row in plan.details["plan"]:
        assert row["exact"]
        total = row["queries"] + row["relevance"] + row["joint"] + row["conditional"] + row["retries"]
        assert total == requests[row["question_id"]] > 0


def copy_of(root: str, tmp_path: Path) -> str:
    shutil.copytree(root, tmp_path / "copy")
    return str(tmp_path / "copy")


def test_logprob_build_matches_direct_evaluation_and_the_formulas(built):
    root, _, result = built
    check_outputs(result, root, ANSWERS, DATES)
    queries = result.tables["queries"].to_pylist()
    assert {q["query_type"] for q in queries} == {"entities", "similar"}  # placeholders never searched
    rejected = read_rejected(root, "prophet").to_pylist()
    query_failures = [d for d in rejected if d["stage"].startswith("query_")]
    assert {d["stage"] for d in query_failures} == {"query_steps", "query_steps_retry1"}
    assert all(d["reason"] == "parse_error" and d["unit"] == "question" for d in query_failures)


def test_plan_after_the_build_is_exact_and_a_rerun_is_free(built, tmp_path, monkeypatch):
    root, questions, result = built
    root = copy_of(root, tmp_path)
    monkeypatch.setattr(backends, "apply_backend", lambda *a, **k: pytest.fail("no engine call expected"))
    planned = run(config(root, questions, scripted(), estimator="logprob", rating="score", plan=True))
    assert_plan_equals_the_run(planned, result)
    evidence = result.tables["evidence"].to_pylist()
    for row in planned.details["plan"]:
        assert row["exact"] and row["queries"] == 3 and row["retries"] == 1  # (b) fails twice
        bins = {}
        for e in evidence:
            if e["question_id"] == row["question_id"]:
                bins[e["bin"]] = bins.get(e["bin"], 0) + 1
        f = cost_formulas(bins, 3, 2, 1)
        assert (row["conditional"], row["joint"]) == (f.conditionals, f.joint_shared)
        assert row["conditional"] == row["formula_conditional"] > 0
    rerun = run(config(root, questions, scripted(), estimator="logprob", rating="score"))
    assert all(s.metrics.get("requests_computed", 0) == 0 for s in rerun.summaries)
    assert rerun.tables["cil"].to_pylist() == result.tables["cil"].to_pylist()


def test_verbalized_paper_layout_retries_failed_parses(built, tmp_path):
    root, questions, _ = built
    root = copy_of(root, tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    result = run(config(root, questions, scripted(marks), estimator="verbalized", layout="grouped"))
    check_outputs(result, root, ANSWERS, DATES)
    names = {s.name: s for s in result.summaries}
    first, retry = names["prophet/conditional"], names["prophet/conditional_retry1"]
    assert first.rows_read == 2 * retry.rows_read  # r = 2 samples; the first of each pair failed
    assert first.rows_rejected == retry.rows_read and retry.rows_rejected == 0
    assert "prophet/conditional_retry2" not in names
    failures = [d for d in read_rejected(root, "prophet").to_pylist() if d["unit"] == "conditional_term"]
    assert len(failures) == retry.rows_read
    assert all(d["stage"] == "conditional" and d["reason"] == "parse_error" for d in failures)
    assert all(d["item_id"] and d["parent_id"] for d in failures)
    assert {r["repeats"] for r in result.tables["cil"].to_pylist()} == {2}


def test_a_repeat_failing_twice_fills_its_own_slot_on_the_second_retry(flaky_built):
    root, _, result = flaky_built
    check_outputs(result, root, ANSWERS, DATES)  # CIL = the formula with c = mean of both slots
    names = {s.name: s for s in result.summaries}
    first = names["prophet/conditional"]
    retry1, retry2 = names["prophet/conditional_retry1"], names["prophet/conditional_retry2"]
    assert first.rows_read == 2 * retry1.rows_read == 2 * retry2.rows_read > 0
    assert retry1.rows_rejected == retry1.rows_read and retry2.rows_rejected == 0
    assert "steps" in {q["query_type"] for q in result.tables["queries"].to_pylist()}


def test_plan_after_a_build_with_retries_counts_every_request(flaky_built, tmp_path, monkeypatch):
    root, questions, result = flaky_built
    root = copy_of(root, tmp_path)
    monkeypatch.setattr(backends, "apply_backend", lambda *a, **k: pytest.fail("no engine call expected"))
    planned = run(config(root, questions, flaky(), estimator="verbalized", layout="grouped", plan=True))
    assert {"prophet/query_steps_retry1", "prophet/conditional_retry2"} <= llm_stages(planned).keys()
    assert_plan_equals_the_run(planned, result)
    for row in planned.details["plan"]:
        assert row["queries"] == 3 and row["retries"] > 1


def test_plan_before_anything_ran_bounds_the_unknown(ray_local, tmp_path, monkeypatch):
    root = str(tmp_path / "root")
    write_corpus(root)
    questions = write_questions(tmp_path / "questions.jsonl")
    monkeypatch.setattr(
        backends, "apply_backend", lambda *a, **k: pytest.fail("plan must not run the engine")
    )
    result = run(config(root, questions, scripted(), estimator="logprob", plan=True))
    assert [r["queries"] for r in result.details["plan"]] == [3, 3]
    assert all(
        r["relevance"] is None and r["joint"] is None and not r["exact"] for r in result.details["plan"]
    )
    assert "?" in format_plan(result.details["plan"])
    assert not storage.exists(storage.join(root, "benchmarks"))


def test_a_late_candidate_fires_the_assertion_before_any_rating_prompt(built, tmp_path, monkeypatch):
    root, questions, _ = built
    root = copy_of(root, tmp_path)
    real = Corpus.search_many
    returned = []

    def leaky(corpus, queries, k):
        late = Hit("id-LATE1", ARTICLE_DATES["LATE1"], 99.0, 0)
        returned.append(late)
        return [[*hits, late] for hits in real(corpus, queries, k)]

    monkeypatch.setattr(Corpus, "search_many", leaky)
    prompts = record_requests(monkeypatch)
    with pytest.raises(LeakageError, match="at or after their question's D"):
        run(
            config(
                root, questions, scripted(), estimator="logprob", rating="score", evidence_only=True, top_n=50
            )
        )
    assert returned and prompts  # the late hit was returned and the query prompts were built
    assert "relevance" not in prompts
    assert not any("Report LATE1" in text for texts in prompts.values() for text in texts)


def test_a_near_duplicate_and_an_article_at_d_never_become_candidates(built):
    """DUP (a marked near-duplicate of A1, two days before D1) and LATE0 (published exactly at D1)
    are both in the index: only the engine's prefilter (``distinct``, ``published_at < D``) keeps
    them out of every search, even of a query naming them, and so out of the candidates."""
    root, _, result = built
    index = ArticleIndex(root)
    later = D1 + dt.timedelta(days=1)
    assert "id-DUP" in {h.doc_id for h in index.search("Report DUP", D1, 20, mode="bm25")}
    assert "id-LATE0" in {
        h.doc_id for h in index.search("Report LATE0", later, 20, mode="bm25", distinct=True)
    }
    eligible = {
        qid: {f"id-{n}" for n, t in ARTICLE_DATES.items() if t and t < at(d, 0) and n != "DUP"}
        for qid, d in DATES.items()
    }
    assert len(eligible["strike-ends"]) == 8 and len(eligible["strike-spreads"]) == 5
    corpus = Corpus(root, searcher(root), searchable=len(ARTICLE_DATES) - 2)
    for qid, d in DATES.items():
        queries = [("Report DUP", d), ("Report LATE0", d), (TOPIC, d)]
        assert [{h.doc_id for h in hits} for hits in corpus.search_many(queries, 20)] == [eligible[qid]] * 3
    # in the build: every query of a question found exactly its eligible articles (depth 20 > 8),
    # and the union of its hits, its candidates, is that set
    for q in result.tables["queries"].to_pylist():
        assert q["n_hits"] == len(eligible[q["question_id"]])
    questions = {q["question_id"]: q for q in result.tables["questions"].to_pylist()}
    assert {qid: q["n_candidates"] for qid, q in questions.items()} == {
        qid: 8 if qid == "strike-ends" else 5 for qid in DATES
    }
    # the cutoff kept out LATE0 and LATE1 (D1), and A1-A3 besides (D2): the index's own counts
    assert {qid: q["n_corpus_on_or_after_D"] for qid, q in questions.items()} == {
        "strike-ends": 2,
        "strike-spreads": 5,
    }


def test_the_driver_neither_searches_nor_reads_the_candidates(built, tmp_path, monkeypatch):
    """LanceDB's caches and the candidates' day reads grow with the index: they belong to the
    ``Searcher`` actor. A driver that searched or read them would hit the patched methods; the
    evidence is the same as the build's."""
    root, questions, result = built
    root = copy_of(root, tmp_path)

    def in_the_driver(*args, **kwargs):
        raise AssertionError("the driver used the index")

    for method in ("search_many", "articles", "count"):
        monkeypatch.setattr(ArticleIndex, method, in_the_driver)
    again = run(config(root, questions, scripted(), estimator="logprob", rating="score", evidence_only=True))
    evidence = ["question_id", "article_id", "rating"]
    assert again.tables["evidence"].num_rows > 0
    assert (
        again.tables["evidence"].select(evidence).to_pylist()
        == result.tables["evidence"].select(evidence).to_pylist()
    )


def test_an_index_behind_its_corpus_is_one_line_before_any_llm_work(built, tmp_path, monkeypatch):
    """A day of articles written after the index was built: the counts disagree, the run stops."""
    root, questions, _ = built
    root = copy_of(root, tmp_path)
    day = dt.datetime(2024, 7, 20, 9, tzinfo=UTC)
    (a1,) = [r for r in ARTICLES.read(root).to_pylist() if r["article_id"] == "id-A1"]
    new = {**a1, "article_id": "id-NEW", "published_at": day, "published_date": day.date()}
    late = pa.Table.from_pylist([new], schema=ARTICLES.schema)
    storage.write_dataset(late, ARTICLES.uri(root), ARTICLES.partition_cols)
    monkeypatch.setattr(backends, "apply_backend", lambda *a, **k: pytest.fail("no engine call expected"))
    with pytest.raises(
        InputError,
        match=r"index at .* is out of date \(11 articles, 1 near-duplicates; corpus/articles has 12 dated",
    ):
        run(config(root, questions, scripted(), estimator="logprob", rating="score"))


def test_limit_builds_the_first_questions_in_file_order(built, tmp_path):
    """``--limit 2`` on a file of three questions builds the first two (the third is never asked
    about: every request is in the cache of the two-question build). The question rows come
    from another file, so the stages' inputs differ and their engines start (the stage runner's
    documented cost), but none computes a request."""
    root, questions, _ = built
    root = copy_of(root, tmp_path)
    lines = Path(questions).read_text(encoding="utf-8").splitlines()
    third = {"id": "strike-third", "question": "Will a third port strike?", "resolution_date": "2024-07-20"}
    three = tmp_path / "three.jsonl"
    three.write_text("\n".join([*lines, json.dumps(third | {"answer": 1})]) + "\n", encoding="utf-8")
    argv = ["--root", root, "--questions", str(three), "--limit", "2", "--estimator", "logprob"]
    argv += ["--rating", "score", "--top-n", "5", "--k-max", "2", "--k", "2", "--search-depth", "20"]
    parsed = parse(Config, argv, "python -m pipelines.prophet")
    assert parsed.limit == 2
    result = run(dataclasses.replace(parsed, llm=scripted()))
    assert result.requests_computed == 0
    built_ids = result.tables["questions"].column("question_id").to_pylist()
    assert sorted(built_ids) == ["strike-ends", "strike-spreads"]
    assert result.tables["eval_items"].num_rows == 2
