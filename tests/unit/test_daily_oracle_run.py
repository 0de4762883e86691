"""The Daily Oracle run around the model: day markers (no articles, engine errors), ``force``,
``limit``, the evaluation items and card rewritten when missing or stale, the category fallback
and the output invariants. The runs here pick no article, so no request reaches an engine."""

import datetime as dt
import json
import logging
from typing import Any

import pyarrow as pa

from pipelines.daily_oracle import Config, run
from pipelines.daily_oracle.articles import corpus_days, select_articles
from pipelines.daily_oracle.days import day_uri, mark_days, unmarked_days
from pipelines.daily_oracle.judge import assign_categories
from pipelines.daily_oracle.outputs import account, kept_rows
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import REJECTED_SCHEMA, Ledger
from pipelines.llm.stage import StageRunner
from udfs import storage
from udfs.daily_oracle.parsing import OTHER, clean_option
from udfs.daily_oracle.questions import time_element
from udfs.daily_oracle.selection import Pick
from udfs.daily_oracle.units import Article, Question, Rejection
from udfs.layout import Layout
from udfs.llm_rows import RESPONSE_SCHEMA
from udfs.schemas import ARTICLES, TableSpec

D1, D2 = dt.date(2022, 9, 15), dt.date(2022, 9, 16)


def _article_row(day: dt.date, n: int = 0, host: str = "example.org") -> dict[str, Any]:
    published = dt.datetime.combine(day, dt.time(12), dt.UTC)
    text = "Officials met on Tuesday to discuss the plan. " * 30
    url = f"https://{host}/{day}/{n}"
    return {
        "article_id": f"{day}-{n}",
        "url": url,
        "canonical_url": url,
        "host": host,
        "title": f"Story {n}",
        "text": text,
        "published_at": published,
        "date_source": "meta",
        "crawled_at": published,
        "language": "en",
        "n_chars": len(text),
        "text_hash": f"{day}-{n}",
        "near_duplicate_of": None,
        "warc_file": None,
        "warc_record_id": None,
        "extractor": "test",
    }


def _ingest(root: str, day: dt.date) -> None:
    """One article of ``day`` from a host outside the publishers (dropped by the pre-filters)."""
    table = pa.Table.from_pylist([_article_row(day)], schema=ARTICLES.file_schema)
    storage.write_table(table, f"{ARTICLES.uri(root)}/published_date={day}/part-0.parquet")


SCRIPTED = LLMConfig(backend="scripted", script={})


def _config(root: str, *days: dt.date, **kw: Any) -> Config:
    return Config(root=root, dates=days, publishers=("npr.org",), llm=SCRIPTED, **kw)


def _ledger() -> Ledger:
    return Ledger(StageRunner("unused", "daily_oracle", SCRIPTED))


def _days_summary(result):
    return next(s for s in result.summaries if s.name == "daily_oracle/days")


# ------------------------------------------------------------------ day markers
def test_a_day_without_articles_is_not_marked_and_builds_once_ingested(tmp_path, caplog):
    root = str(tmp_path)
    _ingest(root, D1)
    with caplog.at_level(logging.WARNING, logger="augury.daily_oracle"):
        first = run(_config(root, D1, D2))
    assert first.details["days_built"] == [D1] and first.details["days_unmarked"] == {D2: "no_articles"}
    assert f"{D2}: no articles; not marked" in caplog.text
    assert storage.is_done(day_uri(root, D1)) and not storage.is_done(day_uri(root, D2))
    summary = _days_summary(first)
    assert summary.reconciles and (summary.rows_read, summary.rows_written) == (2, 1)
    assert summary.rejected == {"no_articles": 1}
    assert first.card["counts"]["days_not_marked_this_run"] == {D2.isoformat(): "no_articles"}

    _ingest(root, D2)
    later = run(_config(root, D1, D2))
    assert (
        later.details["days_built"] == [D2]
        and later.details["days_skipped"] == [D1]
        and later.details["days_unmarked"] == {}
    )
    assert storage.is_done(day_uri(root, D2))


class _RecordingDataset:
    """A dataset that records which publication days each read returned."""

    def __init__(self, dataset):
        self.dataset, self.reads = dataset, []

    def to_table(self, **kwargs):
        table = self.dataset.to_table(**kwargs)
        self.reads.append(set(table.column("published_date").to_pylist()))
        return table

    def __getattr__(self, name):
        return getattr(self.dataset, name)


def test_articles_are_read_one_day_at_a_time_and_days_come_from_partition_names(tmp_path, monkeypatch):
    root = str(tmp_path)
    d3 = D2 + dt.timedelta(days=1)
    for day, n in ((D1, 2), (D2, 1), (d3, 3)):
        rows = [_article_row(day, i) for i in range(n)]
        storage.write_table(
            pa.Table.from_pylist(rows, schema=ARTICLES.file_schema),
            f"{ARTICLES.uri(root)}/published_date={day}/part-0.parquet",
        )
    undated = {**_article_row(D1, 9), "published_at": None, "date_source": None}
    storage.write_table(
        pa.Table.from_pylist([undated], schema=ARTICLES.file_schema),
        f"{ARTICLES.uri(root)}/published_date=__HIVE_DEFAULT_PARTITION__/part-0.parquet",
    )
    recorded, open_dataset = [], storage.open_dataset

    def recording(*args):
        recorded.append(_RecordingDataset(open_dataset(*args)))
        return recorded[-1]

    monkeypatch.setattr(storage, "open_dataset", recording)
    assert corpus_days(root) == [D1, D2, d3]
    assert recorded[0].reads == []  # the days come from directory names: no row read

    monkeypatch.setattr(storage, "open_dataset", open_dataset)
    reads, read_partition = [], TableSpec.read_partition

    def recording_days(spec, root, value, columns=None, filter=None):
        table = read_partition(spec, root, value, columns, filter)
        reads.append((value, set(table.column("published_at").cast(pa.date32()).to_pylist())))
        return table

    monkeypatch.setattr(TableSpec, "read_partition", recording_days)
    _, prefiltered = select_articles(_config(root, D1, D2, d3), [D1, d3, D2])
    # one read per day, of that day's own partition, each row published that day
    assert reads == [(D1, {D1}), (d3, {d3}), (D2, {D2})]
    assert {day: c["articles"] for day, c in prefiltered.items()} == {D1: 2, d3: 3, D2: 1}


def _article(day: dt.date = D1, n: int = 0) -> tuple[Article, list[Question]]:
    """An article with four questions that hold every output invariant."""
    row = _article_row(day, n)
    article = Article(row, day, Pick(row["article_id"], "random", 1), 1, summary="s", keypoint="k")
    texts = [
        ("Will officials approve the plan by October 2022?", "Yes", None),
        ("Will officials withdraw the plan by October 2022?", "No", None),
        ("Who will chair the board in October 2022?", "The mayor", ["The governor", "A judge", "The chief"]),
        ("How many members will vote by October 2022?", "Twelve", ["Three", "Five", "Twenty"]),
    ]
    for index, (question, answer, distractors) in enumerate(texts, start=1):
        q = Question(article, index, question, answer, time_element(question), distractors, [2] * 7, "block")
        q.category = "Politics & Governance"
        article.questions.append(q)
    return article, article.questions


def test_a_day_with_an_engine_error_is_not_marked(tmp_path, caplog):
    root = str(tmp_path)
    kept, questions = _article(n=0)
    failed, _ = _article(n=1)
    failed.rejection = Rejection("qa", "qa_engine_error", "engine: connection reset")
    prefiltered = {D1: {"articles": 2, "eligible": 2, "dropped_by_reason": {}}}
    with caplog.at_level(logging.WARNING, logger="augury.daily_oracle"):
        unmarked = unmarked_days([D1], [kept, failed], questions, prefiltered)
    assert unmarked == {D1: "engine_error"} and "not marked" in caplog.text
    mark_days(root, [D1], unmarked, [kept, failed], questions, prefiltered)
    assert not storage.is_done(day_uri(root, D1))

    failed.rejection = Rejection("summary", "no_new_event")  # a rejection, not an engine error
    questions[0].category_fallback = "engine_error"  # but a category request failed
    assert unmarked_days([D1], [kept, failed], questions, prefiltered) == {D1: "engine_error"}

    questions[0].category_fallback = None
    assert unmarked_days([D1], [kept, failed], questions, prefiltered) == {}
    mark_days(root, [D1], {}, [kept, failed], questions, prefiltered)
    marker = storage.read_marker(day_uri(root, D1))
    assert marker["engine_errors"] == 0 and marker["rejected_by_reason"] == {"no_new_event": 1}


def test_force_rebuilds_a_marked_day_and_keeps_the_response_cache(tmp_path):
    root = str(tmp_path)
    _ingest(root, D1)
    run(_config(root, D1))
    shard = storage.join(root, "daily_oracle", "summary", "responses", "shard-cached-00000.parquet")
    storage.write_table(RESPONSE_SCHEMA.empty_table(), shard)
    assert run(_config(root, D1)).details["days_skipped"] == [D1]
    forced = run(_config(root, D1, force=True))
    assert forced.details["days_built"] == [D1] and forced.details["days_skipped"] == []
    assert storage.exists(shard) and storage.is_done(day_uri(root, D1))


def test_limit_builds_the_oldest_pending_days_first(tmp_path):
    root = str(tmp_path)
    for day in (D1, D2):
        _ingest(root, day)
    first = run(_config(root, D2, D1, limit=1))
    assert first.details["days_built"] == [D1] and not storage.is_done(day_uri(root, D2))
    second = run(_config(root, D1, D2, limit=1))
    assert second.details["days_built"] == [D2] and second.details["days_skipped"] == [D1]


# ------------------------------------------------------------------ eval_items and the card
def test_missing_or_stale_outputs_are_rewritten_when_nothing_is_pending(tmp_path):
    root = str(tmp_path)
    card_uri = Layout(root).benchmark("daily_oracle", "dataset_card.json")
    items_uri = Layout(root).benchmark("daily_oracle", "eval_items")
    _ingest(root, D1)
    run(_config(root, D1))
    assert run(_config(root, D1)).card is None  # up to date: left alone
    card_of_d1 = storage.read_bytes(card_uri)

    storage.delete(card_uri)
    storage.delete(items_uri)
    again = run(_config(root, D1))
    assert again.details["days_built"] == [] and again.requests_computed == 0
    assert again.card["counts"]["days"] == 1 and storage.exists(card_uri) and storage.exists(items_uri)

    _ingest(root, D2)
    run(_config(root, D2))
    storage.write_bytes(card_uri, card_of_d1)  # a run stopped after marking D2 left the old card
    stale = run(_config(root, D1, D2))
    assert stale.details["days_skipped"] == [D1, D2] and sorted(stale.card["counts"]["per_day"]) == [
        D1.isoformat(),
        D2.isoformat(),
    ]


# ------------------------------------------------------------------ category
def test_category_without_any_label_mass_is_other_and_counted():
    article, questions = _article()
    uniform = [1 / 11] * 11
    rows = [
        {"parse_ok": True, "parse_error": None, "raw_text": "Science & Tech", "option_probs": uniform, "option_mass": 0.0},
        {"parse_ok": True, "parse_error": None, "raw_text": "Sports", "option_probs": [0.9] + [0.01] * 10, "option_mass": 0.6},
        {"parse_ok": False, "parse_error": "engine: timeout", "raw_text": None, "option_probs": None, "option_mass": None},
        {"parse_ok": True, "parse_error": None, "raw_text": "Sports", "option_probs": [0.9] + [0.01] * 10, "option_mass": 0.6},
    ]  # fmt: skip
    assign_categories(questions, rows)
    assert [q.category for q in questions] == [OTHER, "Sports", OTHER, "Sports"]
    assert [q.category_prob for q in questions] == [None, 0.9, None, 0.9]
    assert [q.category_fallback for q in questions] == ["no_label_mass", None, "engine_error", None]
    _, counted = account(_ledger(), [article], questions)
    assert counted.metrics == {"category_other_engine_error": 1, "category_other_no_label_mass": 1}


# ------------------------------------------------------------------ output invariants
def test_an_invariant_violation_rejects_the_question_and_the_run_goes_on():
    article, questions = _article()
    questions[2].category = "Weather"  # not one of the 11 labels
    tf, mc = kept_rows(questions, Config(root="unused"), "{}")
    assert [r["question_index"] for r in tf + mc] == [1, 2, 4]
    rejection = questions[2].rejection
    assert rejection.reason == "invariant_violation" and "unknown category" in rejection.detail
    ledger = _ledger()
    articles_summary, questions_summary = account(ledger, [article], questions)
    assert articles_summary.reconciles and questions_summary.reconciles
    assert questions_summary.rows_written == 3 and questions_summary.rejected == {"invariant_violation": 1}
    rejected = ledger.rejected_table()
    assert rejected.schema == REJECTED_SCHEMA
    (row,) = rejected.to_pylist()
    assert (row["stage"], row["reason"], row["unit"]) == ("output", "invariant_violation", "question")
    assert (row["item_id"], row["parent_id"], row["date"]) == (questions[2].id, article.id, D1)
    record = json.loads(row["record"])
    assert record["question"] == questions[2].question and record["distractors"] == questions[2].distractors
    assert record["url"] == article.row["url"] and record["keypoint"] == "k" and row["not_run"] is False
    assert len(mc) == 1


def test_an_answer_cleaned_twice_still_points_at_its_option():
    """The MC answer is cleaned when parsed and again when shuffled; both must agree."""
    _, questions = _article()
    questions[3].answer = clean_option('Twelve".``')
    tf, mc = kept_rows(questions, Config(root="unused"), "{}")
    assert all(q.alive for q in questions) and (len(tf), len(mc)) == (2, 2)
    assert mc[1]["answer_text"] == mc[1][f"choice_{mc[1]['answer']}"] == "Twelve"
