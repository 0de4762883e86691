"""Daily Oracle end to end on the real sample corpus with the scripted backend.

The script answers every step in the expected format, with a few planted faults (an article
without a new event, a TF answer in the wrong slot, a question without a time element, a
distractor equal to its answer, a filter total of 12), so the structural checks run on
non-empty outputs and every rejection path leaves a row with its reason. The run is incremental:
one day whose request for one article ends with an engine error (written, not marked), the
same day again (the failed request retried, the day marked), again (no LLM request), a range
that adds two days, then the first day forced (rebuilt, its requests sent again, and only its).
A plan on a fresh root runs no engine and writes nothing."""

import datetime as dt
import json
import shutil

import pyarrow as pa
import pytest

import pipelines.llm.backends as backends
import pipelines.llm.stage as stage_module
from pipelines.daily_oracle import run
from pipelines.daily_oracle.articles import select_articles
from pipelines.daily_oracle.days import day_uri
from pipelines.daily_oracle.outputs import read_table
from pipelines.daily_oracle.stages import STAGES
from tests.pipelines.daily_oracle_script import (
    D15,
    D16,
    D18,
    config,
    day_files,
    engine_error_for,
    no_engine,
    output_keys,
    request_keys,
    shard_files,
)
from udfs import storage
from udfs.daily_oracle.parsing import CATEGORIES
from udfs.daily_oracle.questions import LETTERS, time_element
from udfs.daily_oracle.selection import TemporalLeakError
from udfs.eval_items import EVAL_ITEM_SCHEMA, validate_item
from udfs.schemas import ARTICLES

pytestmark = [pytest.mark.ray, pytest.mark.spark]


@pytest.fixture(scope="module")
def built(corpus_root, ray_local, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("daily_oracle") / "root")
    shutil.copytree(corpus_root, root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stage_module, "RequestRenderer", engine_error_for("qa", "Sterigenics"))
        broken = run(config(root, D15))
    marked_after_error = storage.is_done(day_uri(root, D15))
    first = run(config(root, D15))
    files15 = day_files(root, D15)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(backends, "apply_backend", no_engine)
        again = run(config(root, D15))
    later = run(config(root, D15, D16, D18))
    after_later = {
        "files15": day_files(root, D15),
        "files18": day_files(root, D18),
        "shards": shard_files(root),
        "keys18": output_keys(root),
    }
    forced = run(config(root, D15, force=True))
    forced_keys = output_keys(root)
    return {
        "root": root,
        "broken": broken,
        "marked_after_error": marked_after_error,
        "first": first,
        "again": again,
        "later": later,
        "forced": forced,
        "files15": files15,
        "after_later": after_later,
        "forced_keys": forced_keys,
    }


def _stage(result, name):
    return next(s for s in result.summaries if s.name == f"daily_oracle/{name}")


# ------------------------------------------------------------------ incremental runs
def test_a_day_with_an_engine_error_is_written_but_not_marked(built):
    broken = built["broken"]
    assert broken.details["days_built"] == [] and broken.details["days_unmarked"] == {D15: "engine_error"}
    assert not built["marked_after_error"]
    assert _stage(broken, "days").rejected == {"engine_error": 1} and _stage(broken, "days").reconciles
    failed = [r for r in broken.tables["rejected"].to_pylist() if r["reason"] == "qa_engine_error"]
    assert len(failed) == 1 and "Sterigenics" in json.loads(failed[0]["record"])["title"]
    assert (failed[0]["stage"], failed[0]["unit"]) == ("qa", "article")
    assert failed[0]["detail"].startswith("engine: no script for prompt unscripted")
    assert broken.tables["tf_questions"].num_rows > 0  # the day's tables are written all the same
    assert broken.card["counts"]["days_not_marked_this_run"] == {D15.isoformat(): "engine_error"}


def test_the_next_run_rebuilds_that_day_retrying_only_the_failed_request(built):
    first = built["first"]
    assert first.details["days_built"] == [D15] and first.details["days_unmarked"] == {}
    assert _stage(first, "summary").metrics["requests_computed"] == 0
    assert _stage(first, "qa").metrics["requests_computed"] == 1
    assert "qa_engine_error" not in set(first.tables["rejected"].column("reason").to_pylist())


def test_first_day_is_built(built):
    first = built["first"]
    assert first.details["days_built"] == [D15] and first.details["days_skipped"] == []
    assert first.tables["tf_questions"].num_rows > 0 and first.tables["mc_questions"].num_rows > 0
    assert first.requests_computed > 0
    assert storage.is_done(day_uri(built["root"], D15))
    names = [s.name.split("/")[1] for s in first.summaries]
    assert names == [
        "inputs",
        "prefilter",
        "select",
        "summary",
        "qa",
        "distractors",
        "filter",
        "category",
        "articles",
        "questions",
        "days",
        "quality",
    ]
    assert all(s.reconciles for s in first.summaries)


def test_rerun_of_a_built_day_sends_no_request(built):
    again = built["again"]
    assert again.details["days_built"] == [] and again.details["days_skipped"] == [D15]
    assert again.requests_computed == 0 and [s.name for s in again.summaries] == ["daily_oracle/inputs"]


def test_adding_days_builds_only_those_days(built):
    later, root = built["later"], built["root"]
    assert later.details["days_built"] == [D16, D18] and later.details["days_skipped"] == [D15]
    assert built["after_later"]["files15"] == built["files15"]  # day 15 untouched, byte for byte
    for name in ("selection", "tf_questions", "mc_questions", "rejected"):  # this run's days only
        assert set(later.tables[name].column("date").to_pylist()) <= {D16, D18}
    # only day 18 reaches the model (day 16 has no English article of the allowed hosts)
    assert _stage(later, "summary").metrics["requests_computed"] == _stage(later, "select").rows_written == 5
    assert storage.is_done(day_uri(root, D16))


def test_force_rebuilds_a_day_and_sends_only_its_requests_again(built):
    forced, root = built["forced"], built["root"]
    assert forced.details["days_built"] == [D15] and forced.details["days_skipped"] == []
    # every request of day 15 is sent again, and nothing else
    assert _stage(forced, "summary").metrics["requests_computed"] == _stage(forced, "select").rows_written > 0
    for name in STAGES:
        metrics = _stage(forced, name).metrics
        assert metrics["requests_cached"] == 0 and metrics["requests_computed"] == metrics["requests_unique"]
    before, after = built["after_later"]["shards"], shard_files(root)
    assert {f: after[f] for f in before} == before  # the earlier answers are kept, byte for byte
    new = {f: data for f, data in after.items() if f not in before}
    assert (
        request_keys(new) == built["forced_keys"] and len(request_keys(new)) == forced.requests_computed > 0
    )
    assert not request_keys(new) & built["after_later"]["keys18"]  # day 18's cached answers untouched
    assert day_files(root, D18) == built["after_later"]["files18"]  # the other days untouched
    assert storage.is_done(day_uri(root, D15))
    for name in ("tf_questions", "mc_questions", "rejected"):
        assert forced.tables[name].num_rows == built["first"].tables[name].num_rows


# ------------------------------------------------------------------ outputs
@pytest.fixture(scope="module")
def outputs(built):
    root = built["root"]
    return {
        name: read_table(root, name) for name in ("selection", "tf_questions", "mc_questions", "rejected")
    }


def test_kept_questions_hold_the_structural_checks(outputs):
    tf, mc = outputs["tf_questions"].to_pylist(), outputs["mc_questions"].to_pylist()
    assert len(tf) >= 10 and len(mc) >= 6  # non-empty before anything else
    ids = [r["question_id"] for r in tf + mc]
    assert len(set(ids)) == len(ids)
    for r in tf + mc:
        assert "?" in r["question"] and not r["question"].startswith(('"', "'"))
        element = time_element(r["question"])
        assert element is not None and element.phrase == r["time_element"] and element.end >= r["date"]
        assert r["date"] == r["published_at"].date()  # resolution date = publication date (UTC)
        assert len(r["filter_scores"]) == 7 and sum(r["filter_scores"]) == r["filter_total"] >= 13
        assert r["category"] in CATEGORIES and r["article_id"] and r["url"] and r["keypoint"]
    assert {(r["question_index"], r["answer"]) for r in tf} == {(1, "Yes"), (2, "No")}
    for r in mc:
        choices = [r[f"choice_{x}"] for x in LETTERS]
        assert len(set(choices)) == 4 and r["question_index"] in (3, 4)
        assert choices[LETTERS.index(r["answer"])] == r["answer_text"]
        assert r["mc_stem"] in ("who", "how many")
    assert {r["category"] for r in tf + mc} == {"Politics & Governance", "Other"}


def test_source_articles_match_the_corpus(outputs, corpus_root):
    corpus = {r["article_id"]: r for r in ARTICLES.read(corpus_root).to_pylist()}
    for r in outputs["tf_questions"].to_pylist() + outputs["mc_questions"].to_pylist():
        source = corpus[r["article_id"]]
        assert (source["url"], source["published_date"]) == (r["url"], r["date"])


def test_every_rejection_has_a_reason_and_counts_reconcile(built, outputs):
    rejected = outputs["rejected"].to_pylist()
    assert rejected and all(r["reason"] and r["stage"] and r["item_id"] and r["date"] for r in rejected)
    for r in rejected:  # a question names its article; the rest of the row is in ``record``
        assert (r["parent_id"] is not None) == (r["unit"] == "question") and not r["not_run"]
        assert json.loads(r["record"])["url"]
    reasons = {r["reason"] for r in rejected}
    assert reasons == {
        "no_new_event",
        "qa_parse_error",
        "distractor_equals_answer",
        "filter_total_below_13",
    }
    assert all(r["raw_text"] for r in rejected)
    for day in (D15, D16, D18):
        counts = storage.read_marker(day_uri(built["root"], day))
        assert counts["prefilter"]["articles"] == counts["prefilter"]["eligible"] + sum(
            counts["prefilter"]["dropped_by_reason"].values()
        )
        assert counts["questions_generated"] == 4 * (counts["selected"] - counts["rejected_articles"])
        assert counts["questions_generated"] == counts["tf"] + counts["mc"] + counts["rejected_questions"]
        kept = sum(
            outputs[t].filter(pa.compute.equal(outputs[t]["date"], day)).num_rows
            for t in ("tf_questions", "mc_questions")
        )
        assert kept == counts["tf"] + counts["mc"]
    for result in (built["first"], built["later"]):
        assert all(s.reconciles for s in result.summaries)


def test_eval_items(built, outputs):
    items = storage.read_table(
        storage.join(built["root"], "benchmarks", "daily_oracle", "eval_items"), EVAL_ITEM_SCHEMA, ("split",)
    ).to_pylist()
    tf, mc = outputs["tf_questions"], outputs["mc_questions"]
    assert len(items) == tf.num_rows + mc.num_rows > 0
    by_id = {r["question_id"]: r for r in tf.to_pylist() + mc.to_pylist()}
    for item in items:
        validate_item(item)
        row = by_id[item["item_id"]]
        resolve = dt.datetime.combine(row["date"], dt.time(), dt.UTC)
        assert item["t_resolve"] == resolve and item["t_cut"] == resolve - dt.timedelta(days=1)
        assert item["t_cut"] < row["published_at"]  # the source article lies after the cutoff
        assert item["gold_article_ids"] == [row["article_id"]]
        gold = item["choices"][item["gold_index"]]
        assert gold == (row["answer"] if item["type"] == "yesno" else row["answer_text"])


def test_dataset_card(built, outputs):
    card = storage.read_json(storage.join(built["root"], "benchmarks", "daily_oracle", "dataset_card.json"))
    counts = card["counts"]
    assert sorted(counts["per_day"]) == ["2022-09-15", "2022-09-16", "2022-09-18"]
    assert counts["tf_questions"] == outputs["tf_questions"].num_rows
    assert (
        sum(c["tf"] + c["mc"] for c in counts["per_category"].values())
        == counts["tf_questions"] + counts["mc_questions"]
    )
    assert built["later"].card["llm_cost"]["total"]["requests_computed"] > 0
    forced = built["forced"].requests_computed  # the last run: D15 forced, its requests sent again
    assert card["llm_cost"]["total"]["requests_computed"] == forced > 0
    assert card["counts"]["days_built_this_run"] == ["2022-09-15"]
    assert set(card["prompt_versions"]) == {"summary", "qa", "distractors", "filter", "category"}


def test_selection_is_identical_across_runs(built, outputs):
    cfg = config(built["root"], D15, D18)
    first, _ = select_articles(cfg, [D15, D18])
    second, _ = select_articles(cfg, [D15, D18])
    assert [(a.id, a.pick) for a in first] == [(a.id, a.pick) for a in second]
    stored = sorted(
        (r["article_id"], r["selection"], r["draw_seed"]) for r in outputs["selection"].to_pylist()
    )
    assert stored == sorted((a.id, a.pick.selection, a.pick.draw_seed) for a in first)
    other, _ = select_articles(config(built["root"], D15, D18, n_random=1, n_hot=1, seed=1), [D15, D18])
    assert len(other) == 4


def test_a_late_article_in_a_day_is_refused(root_with_corpus):
    """A row filed under 2022-09-18 but published the next day must stop the build."""
    day_dir = ARTICLES.uri(root_with_corpus) + "/published_date=2022-09-18"
    (existing,) = [f for f in storage.list_files(day_dir, ".parquet")][:1]
    row = storage.read_table(existing).slice(0, 1).to_pylist()[0]
    row.update(
        article_id="late",
        canonical_url="https://npr.org/late",
        text_hash="late",
        published_at=dt.datetime(2022, 9, 19, 1, tzinfo=dt.UTC),
    )
    storage.write_table(pa.Table.from_pylist([row], schema=ARTICLES.file_schema), day_dir + "/late.parquet")
    with pytest.raises(TemporalLeakError, match="late"):
        run(config(root_with_corpus, D18))
    assert not storage.is_done(day_uri(root_with_corpus, D18))


def test_a_plan_runs_no_engine_and_writes_nothing(root_with_corpus, ray_local, monkeypatch, capsys):
    before = sorted(storage.list_files(root_with_corpus))
    monkeypatch.setattr(backends, "apply_backend", no_engine)
    planned = run(config(root_with_corpus, D15, D18, plan=True))
    assert sorted(storage.list_files(root_with_corpus)) == before
    assert planned.details["days_built"] == [] and planned.card is None and planned.requests_computed == 0
    plans = {p.stage: p for p in planned.plans}
    assert list(plans) == list(STAGES)
    picked = _stage(planned, "select").rows_written
    assert plans["summary"].rows == plans["summary"].requests_to_compute == picked > 0
    assert plans["summary"].est_prompt_tokens > 0 and plans["qa"].rows == 0  # nothing cached yet
    printed = capsys.readouterr().out
    assert "summary" in printed and "only sees the rows whose earlier stages' answers are cached" in printed
