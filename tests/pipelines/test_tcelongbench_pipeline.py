"""The TCELongBench builder end to end on real articles (reported.ly, September 2015): with the
scripted backend (well-formed answers, so the structural checks run on non-empty outputs) and
with the real embedded model (every stage completes, failures become rejected rows, counts
reconcile)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from pipelines.index import build as index_build
from pipelines.index.config import Config as IndexConfig
from pipelines.llm.attempts import fit
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import REJECTED_SCHEMA, read_rejected
from pipelines.tcelongbench import Config, run
from pipelines.tcelongbench.stages import llm_stages
from udfs import storage
from udfs.ids import stable_id
from udfs.llm_parsing import check_output
from udfs.schemas import ARTICLES
from udfs.urls import norm_url

pytestmark = [pytest.mark.ray]

# Demo clustering values for a 46-article month (the paper's defaults need a large corpus).
DEMO = dict(min_cluster_size=3, min_samples=2, time_scale_days=14.0)


def write_reportedly_articles(root: str, shared_data: Path) -> int:
    """Write the real reported.ly articles (JSON lines) as ARTICLES rows under ``root`` and index
    them (needs ``ray_local``); returns the row count. The demo ingests the same file with ``jobs.ingest_articles_jsonl``; the tests write
    the rows directly so that they need no Spark session."""
    rows = []
    for line in (shared_data / "wcep" / "reportedly_articles_2015-09.json").read_text().splitlines():
        rec = json.loads(line)
        text = "\n\n".join(p for p in rec["text"] if p.strip())
        url = norm_url(rec["url"])
        published = dt.datetime.fromisoformat(rec["published"]).astimezone(dt.UTC)
        rows.append(
            {
                "article_id": stable_id(url),
                "url": rec["url"],
                "canonical_url": url,
                "host": "reported.ly",
                "title": rec["title"],
                "text": text,
                "published_at": published,
                "date_source": "published",
                "crawled_at": None,
                "language": "en",
                "n_chars": len(text),
                "text_hash": stable_id(" ".join(text.split())),
                "near_duplicate_of": None,
                "warc_file": None,
                "warc_record_id": None,
                "extractor": "jsonl",
                "published_date": published.date(),
            }
        )
    table = pa.Table.from_pylist(rows, schema=ARTICLES.schema)
    storage.write_dataset(table, ARTICLES.uri(root), ARTICLES.partition_cols)
    index_build.run(IndexConfig(root=root, passage_words=()))  # formation clusters the index's vectors
    return len(rows)


# ------------------------------------------------------------------------------ scripted answers
def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if len(s.split()) >= 5]


def _words(text: str, n: int, digits: bool = True) -> str:
    """The first ``n`` words of ``text`` without punctuation, each no longer than a word of the
    declared answer forms (``udfs.tcelongbench.outputs``), optionally without digits."""
    words = [
        w
        for w in re.sub(r"[^\w\s]", " ", text).split()
        if len(w) <= 15 and (digits or not re.search(r"\d", w))
    ]
    return " ".join(words[:n])


def _sentence(text: str, n: int) -> str:
    """The first ``n`` words of ``text`` no longer than a declared word (punctuation kept), ending
    in a full stop."""
    words = " ".join(w for w in text.split() if len(w) <= 15).split()[:n]
    return " ".join(words).rstrip(".!?") + "."


SCRIPT = {
    "tcelongbench.article_summary": lambda v: (
        " " + " ".join(_sentence(s, 20) for s in _sentences(v["text"])[:3])
    ),
    "tcelongbench.day_summary": lambda v: (
        " " + " ".join(_sentence(_sentences(s)[0], 20) for s in v["summaries"])
    ),
    "tcelongbench.key_points": lambda v: (
        " " + "\n* ".join(_sentence(s, 12) for s in _sentences(v["summary"])[:4])
    ),
    "tcelongbench.detail_qa": lambda v: (
        f" What happened when {_words(v['point'], 9, digits=False)}? Answer: {_words(v['point'], 4)}"
    ),
    "tcelongbench.forecast_qa": lambda v: (
        f" What will follow once {_words(v['point'], 9, digits=False)} after {v['day']}?"
        f" Answer: {_words(v['point'], 4)}"
    ),
    "tcelongbench.evidence": lambda v: f" is correct. {_sentence(_sentences(v['article'])[0], 30)}",
    "tcelongbench.distractors": lambda v: (
        " A delay announced by the city council\n(c) A protest by farmers in the north\n"
        "(d) A new trade agreement with Japan"
    ),
    "tcelongbench.forecast_check": lambda v: " A. Q2: B",
    "tcelongbench.order_check": lambda v: " A. Q2: A",
    "tcelongbench.entities": lambda v: (
        "\nDATE: Monday" + "".join(f"\nGPE: {w}" for w in re.findall(r"\b[A-Z][a-z]{3,}\b", v["point"])[1:8])
    ),
}


@pytest.fixture(scope="module")
def scripted_build(reportedly_root, copy_root):
    root = copy_root(reportedly_root)
    n = storage.count_rows(ARTICLES.uri(root))
    config = Config(root=root, llm=LLMConfig(backend="scripted", script=SCRIPT), **DEMO)
    return n, config, run(config)


def test_scripted_build_counts_reconcile(scripted_build):
    n_articles, config, result = scripted_build
    assert n_articles == 46
    assert all(s.reconciles for s in result.summaries), [s.name for s in result.summaries if not s.reconciles]
    formation = next(s for s in result.summaries if s.name.endswith("tce_formation"))
    assert formation.rows_read == n_articles
    tables = result.tables
    assert tables["tce"].num_rows >= 1
    assert formation.rows_written == tables["tce_article"].num_rows
    rejected = read_rejected(config.root, "tcelongbench").to_pylist()
    assert all(r["reason"] for r in rejected)
    # every article is either in a TCE or rejected with a reason
    formation_rejects = [r for r in rejected if r["stage"] == "tce_formation"]
    assert len(formation_rejects) + tables["tce_article"].num_rows == n_articles
    card = storage.read_json(storage.join(config.root, "benchmarks", "tcelongbench", "dataset_card.json"))
    assert card["counts"]["qa_detail"] == tables["qa_detail"].num_rows


def test_scripted_rejected_rows_are_under_benchmarks_in_the_one_schema(scripted_build):
    _, config, result = scripted_build
    assert "rejected" not in result.tables  # streamed to disk, never returned whole
    written = read_rejected(config.root, "tcelongbench")
    assert written.num_rows > 0 and written.schema == REJECTED_SCHEMA
    card = storage.read_json(storage.join(config.root, "benchmarks", "tcelongbench", "dataset_card.json"))
    assert written.num_rows == card["counts"]["rejected"] == sum(card["counts"]["rejected_by_stage"].values())
    assert not storage.exists(storage.join(config.root, "tcelongbench", "rejected"))
    rows = written.to_pylist()
    formation = [r for r in rows if r["stage"] == "tce_formation"]
    assert formation and all(r["unit"] == "article" and r["item_id"] for r in formation)
    assert not any(r["not_run"] for r in rows)


def test_scripted_mc_questions_have_four_distinct_choices_and_one_gold(scripted_build):
    _, _, result = scripted_build
    for name in ("qa_detail", "qa_forecast"):
        rows = result.tables[name].to_pylist()
        assert rows, f"{name} is empty"
        for q in rows:
            assert len(q["choices"]) == 4 and len(set(q["choices"])) == 4
            assert q["choice_types"].count("correct") == 1
            assert q["choices"]["ABCD".index(q["answer_letter"])] == q["gold"]
            assert q["choice_types"]["ABCD".index(q["answer_letter"])] == "correct"


def test_scripted_detail_gold_before_last_day_and_forecast_from_last_day(scripted_build):
    _, _, result = scripted_build
    tces = {t["tce_id"]: t for t in result.tables["tce"].to_pylist()}
    key_points = {p["kp_id"]: p for p in result.tables["key_point"].to_pylist()}
    details, forecasts = result.tables["qa_detail"].to_pylist(), result.tables["qa_forecast"].to_pylist()
    assert details and forecasts
    for q in details:
        assert q["gold_date"] <= tces[q["tce_id"]]["dates"][-2] == q["cutoff_date"]
        assert q["background2_date"] <= q["cutoff_date"] and q["background2_date"] != q["gold_date"]
    for q in forecasts:
        t = tces[q["tce_id"]]
        assert q["gold_date"] == t["dates"][-1] == q["t_n"]
        (kp_id,) = q["kp_ids"]
        assert key_points[kp_id]["date"] == t["dates"][-1] and key_points[kp_id]["status"] == "kept"
        assert q["background2_date"] < q["t_n"]
        assert q["open_answer"] == q["gold"]


def test_scripted_forecast_context_excludes_last_day(scripted_build):
    _, _, result = scripted_build
    dates = {r["article_id"]: r["date"] for r in result.tables["tce_article"].to_pylist()}
    items = result.tables["eval_items"].to_pylist()
    forecasts = [i for i in items if i["task"] in ("forecast", "forecast_open")]
    assert forecasts
    for item in items:
        assert item["context_article_ids"], item["item_id"]
        cut = item["t_cut"].date()
        assert all(dates[a] < cut for a in item["context_article_ids"])
    for item in forecasts:
        (gold,) = item["gold_article_ids"]
        assert dates[gold] == item["t_cut"].date() and gold not in item["context_article_ids"]
    assert {i["type"] for i in items} >= {"mc", "open", "ordering"}


def test_scripted_order_questions(scripted_build):
    _, _, result = scripted_build
    rows = result.tables["qa_order"].to_pylist()
    assert rows, "no order question"
    for q in rows:
        assert len(q["choices"]) == 3 and len(set(q["choice_dates"])) == 3
        assert q["gold_dates"] == sorted(q["gold_dates"]) and all(
            d <= q["cutoff_date"] for d in q["gold_dates"]
        )
        by_letter = dict(zip("ABC", q["choice_dates"], strict=True))
        assert [by_letter[x] for x in q["gold_order"].split(",")] == q["gold_dates"]
    seen: list[set[str]] = []
    for q in rows:  # no two kept problems of a TCE share more than one key point
        ids = set(q["kp_ids"])
        assert all(len(ids & other) <= 1 for other in seen)
        seen.append(ids)
    items = [i for i in result.tables["eval_items"].to_pylist() if i["type"] == "ordering"]
    by_id = {q["qa_id"]: q for q in rows}
    for item in items:
        q = by_id[item["item_id"]]
        assert [q["choice_dates"][i] for i in item["gold_order"]] == q["gold_dates"]


def test_scripted_splits_never_share_a_tce(scripted_build):
    _, _, result = scripted_build
    split_of = {t["tce_id"]: t["split"] for t in result.tables["tce"].to_pylist()}
    tce_of = {}
    for name in ("qa_detail", "qa_order", "qa_forecast"):
        rows = result.tables[name].to_pylist()
        assert rows
        for r in rows:
            assert r["split"] == split_of[r["tce_id"]]
            tce_of[r["qa_id"]] = r["tce_id"]
    for item in result.tables["eval_items"].to_pylist():
        assert item["split"] == split_of[tce_of[item["source_id"]]]
    tces_per_split = Counter(split_of.values())
    assert sum(tces_per_split.values()) == len(split_of)


LLM_STAGES = (
    "article_summary",
    "day_summary",
    "key_points",
    "detail_qa",
    "forecast_qa",
    "evidence",
    "distractors",
    "forecast_votes",
    "entities",
    "order_votes",
)


@pytest.mark.llm
def test_real_model_build_completes_every_stage(reportedly_root, copy_root):
    """One TCE of 3 days x 1 article, short inputs and the demo's 32 new tokens: every stage
    completes, the base model's unusable answers become rejected rows with reasons, counts
    reconcile, every kept answer validates against the form it was declared with, and the
    question generators give a non-empty candidate table before the Evidence check."""
    root = copy_root(reportedly_root)
    config = Config(
        root=root,
        llm=LLMConfig(max_new_tokens=32),
        limit=1,
        max_articles_per_day=1,
        max_article_words=100,
        **DEMO,
    )
    result = run(config)
    (tce,) = result.tables["tce"].to_pylist()
    assert tce["n"] == 3 and tce["n_articles"] == 3
    by_name = {s.name.split("/", 1)[1]: s for s in result.summaries}
    assert set(LLM_STAGES) <= set(by_name)
    assert all(s.reconciles for s in result.summaries)
    assert by_name["article_summary"].rows_read == 3
    rejected = read_rejected(root, "tcelongbench").to_pylist()
    for stage in LLM_STAGES:
        llm_rejects = [r for r in rejected if r["stage"] == stage]
        assert len(llm_rejects) == by_name[stage].rows_rejected
        assert all(r["reason"] in ("parse_error", "engine_error") and r["detail"] for r in llm_rejects)
    for name in LLM_STAGES:
        uri = storage.join(root, "tcelongbench", name)
        assert storage.is_done(uri), name
    assert by_name["key_points"].rows_read >= 1
    assert result.card["llm_cost"]["total"]["requests_computed"] >= 3

    stages = {name: fit(stage, config.llm.max_new_tokens) for name, stage in llm_stages(config).items()}
    for name in LLM_STAGES:
        out = storage.read_table(storage.join(root, "tcelongbench", name, "output")).to_pylist()
        for row in (r for r in out if r["parse_ok"]):
            form = stages[name].structured
            if stages[name].structured_column:
                form = json.loads(row[stages[name].structured_column])
            check_output(form, row["raw_text"])
    assert by_name["question_rules"].rows_read >= 1, "no candidate question before the checks"
    assert by_name["detail_qa"].rows_written + by_name["forecast_qa"].rows_written >= 1
