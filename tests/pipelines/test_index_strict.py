"""Strict statistics, passage tables and batched retrieval of the article index: window-only BM25 equals BM25
computed by hand over the window's articles, a later article changes no strict score (and does
change a whole-index score), partial days count to the microsecond; passages keep their article
for exclusion and the cutoff; the judge's window search."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import retrieve
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.engine import ArticleIndex, passage_table
from tests.fixtures.evaluate.data import write_articles
from udfs.cli import InputError
from udfs.index_docs import terms
from udfs.retrieval import LeakageError
from udfs.schemas import UTC_TS

DAY = dt.datetime(2024, 5, 10, tzinfo=dt.UTC)
ROWS = [
    ("a", DAY - dt.timedelta(days=9), "Ferry strike", "The ferry strike closed the harbour for a day."),
    ("b", DAY - dt.timedelta(days=5), "Harbour budget", "The harbour budget grew; the ferry fleet too."),
    ("c", DAY - dt.timedelta(days=3), "Rail news", "A new rail line opens in the valley."),
    ("d", DAY - dt.timedelta(days=1), "Ferry timetable", "Ferry timetable changes for the summer."),
    ("noon-before", DAY + dt.timedelta(hours=11), "Ferry crew", "Ferry crew talks resume."),
    ("noon-after", DAY + dt.timedelta(hours=13), "Ferry ferry ferry", "Ferry ferry harbour ferry."),
    ("undated", None, "Ferry undated", "Ferry harbour news with no date."),
]
QUERY = "ferry harbour"
ENCODER = "hashing-384"  # dense and hybrid are tested for their cutoff and top k, not similarity


def by_hand(rows, query: str, cutoff: dt.datetime) -> dict[str, float]:
    """BM25 (k1 1.2, b 0.75, Lucene IDF) over the indexed text of the articles before ``cutoff``."""
    docs = {i: Counter(terms(f"{title} {text}")) for i, when, title, text in rows if when and when < cutoff}
    n, avgdl = len(docs), sum(sum(c.values()) for c in docs.values()) / len(docs)
    scores = {}
    for i, counts in docs.items():
        dl, score = sum(counts.values()), 0.0
        for t in set(terms(query)):
            df = sum(1 for c in docs.values() if c[t])
            if counts[t]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * counts[t] * 2.2 / (counts[t] + 1.2 * (0.25 + 0.75 * dl / avgdl))
        if score > 0:
            scores[i] = score
    return scores


@pytest.fixture(scope="module")
def root(tmp_path_factory, ray_local) -> str:
    root = str(tmp_path_factory.mktemp("strict"))
    write_articles(root, ROWS)
    run(Config(root=root, encoder=ENCODER, passage_words=(4,)))
    return root


@pytest.mark.parametrize("cutoff", [DAY, DAY + dt.timedelta(hours=12), DAY.date() + dt.timedelta(days=1)])
def test_strict_scores_are_bm25_over_the_window_only(root, cutoff):
    index = ArticleIndex(root)
    hits = index.search(QUERY, cutoff, k=10, mode="bm25", strict=True)
    limit = cutoff if isinstance(cutoff, dt.datetime) else dt.datetime.combine(cutoff, dt.time(0), dt.UTC)
    expected = by_hand(ROWS, QUERY, limit)
    assert {h.doc_id: pytest.approx(h.score) for h in hits} == expected
    assert [h.doc_id for h in hits] == sorted(expected, key=lambda i: (-expected[i], i))


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_a_full_top_k_of_eligible_articles_comes_back(root, mode):
    """The most relevant article is after the cutoff: a post-filtered top-2 would miss one."""
    for strict in (False, True) if mode != "dense" else (False,):
        hits = ArticleIndex(root).search(QUERY, DAY + dt.timedelta(hours=12), 2, mode, strict=strict)
        assert len(hits) == 2 and "noon-after" not in {h.doc_id for h in hits}


def test_a_later_article_changes_no_strict_score(tmp_path, ray_local):
    root = str(tmp_path)
    write_articles(root, ROWS)
    run(Config(root=root, encoder=ENCODER, passage_words=()))
    cutoff = DAY + dt.timedelta(hours=12)
    before = ArticleIndex(root)
    strict = [(h.doc_id, h.score) for h in before.search(QUERY, cutoff, 10, "bm25", strict=True)]
    loose = [(h.doc_id, h.score) for h in before.search(QUERY, cutoff, 10, "bm25")]
    late = [(f"late{n}", DAY + dt.timedelta(days=3), "Ferry", "Ferry harbour ferry.") for n in range(3)]
    write_articles(root, late)
    assert run(Config(root=root, encoder=ENCODER, passage_words=())).rows_written == 3
    after = ArticleIndex(root)
    assert [(h.doc_id, h.score) for h in after.search(QUERY, cutoff, 10, "bm25", strict=True)] == strict
    assert [(h.doc_id, h.score) for h in after.search(QUERY, cutoff, 10, "bm25")] != loose
    hybrid = after.search(QUERY, cutoff, 10, "hybrid", strict=True)
    assert hybrid and {h.doc_id for h in hybrid} <= {"a", "b", "c", "d", "noon-before"}


def test_passages_keep_their_article_and_cutoff(root):
    index = ArticleIndex(root, passage_table(4))
    hits = index.search("ferry harbour", DAY, k=20, mode="bm25", exclude={"b"})
    assert hits and all(h.source_id in {"a", "d"} for h in hits)
    assert all(h.doc_id.startswith(f"{h.source_id}#") and len(h.text.split()) <= 4 for h in hits)
    assert index.count(DAY) == sum(math.ceil(len(r[3].split()) / 4) for r in ROWS[:4])
    with pytest.raises(ValueError, match="whole articles"):
        index.search("ferry", DAY, k=3, mode="bm25", strict=True)
    with pytest.raises(FileNotFoundError, match="--passage-words 100"):
        ArticleIndex(root, passage_table(100))


def test_the_judge_window_is_inclusive_and_asserted_searches_are_not(root, monkeypatch):
    index = ArticleIndex(root, passage_table(4))
    start, end = DAY + dt.timedelta(hours=11), DAY + dt.timedelta(hours=13)
    found = index.nearest("ferry crew talks", start, end, k=20)
    assert {h.source_id for h in found} == {"noon-before", "noon-after"}
    monkeypatch.setattr("pipelines.index.engine.eligible", lambda *a, **k: "true")
    with pytest.raises(LeakageError):
        ArticleIndex(root).search(QUERY, DAY, k=10, mode="bm25", strict=True)


def test_batched_retrieval_writes_the_hits_of_every_query(root, tmp_path):
    queries = pa.table(
        {
            "query_id": ["q1", "q2", "q3"],
            "query": [QUERY, "rail valley", "zeppelin"],
            "cutoff": pa.array([DAY, DAY + dt.timedelta(hours=12), DAY], UTC_TS),
        }
    )
    pq.write_table(queries, tmp_path / "queries.parquet")
    out = str(tmp_path / "hits")
    summary = retrieve.run(
        retrieve.Config(root=root, queries=str(tmp_path / "queries.parquet"), out=out, k=3, batch_size=2)
    )
    hits = pq.read_table(out).to_pylist()
    assert summary.rows_read == 3 and summary.reconciles and summary.metrics["hits written"] == len(hits)
    index = ArticleIndex(root)
    for q in queries.to_pylist():
        mine = sorted((h for h in hits if h["query_id"] == q["query_id"]), key=lambda h: h["rank"])
        direct = index.search(q["query"], q["cutoff"], 3, "bm25")
        assert [(h["article_id"], h["rank"]) for h in mine] == [(h.doc_id, h.rank) for h in direct]
        assert all(h["published_at"] < q["cutoff"] for h in mine)
    assert {h["query_id"] for h in hits} == {"q1", "q2"}  # no article mentions a zeppelin


def test_a_rerun_of_batched_retrieval_replaces_its_hit_table(root, tmp_path):
    queries = pa.table({"query_id": ["q1"], "query": [QUERY], "cutoff": pa.array([DAY], UTC_TS)})
    pq.write_table(queries, tmp_path / "queries.parquet")
    out = str(tmp_path / "hits")
    config = retrieve.Config(root=root, queries=str(tmp_path / "queries.parquet"), out=out, k=3)
    retrieve.run(config)
    assert pq.read_table(out).num_rows == 3
    summary = retrieve.run(dataclasses.replace(config, k=2))
    hits = pq.read_table(out)
    assert hits.num_rows == summary.metrics["hits written"] == 2  # appended, there were 5
    assert hits["rank"].to_pylist() == [1, 2]


def test_batched_retrieval_refuses_an_out_that_is_not_a_hit_table(root, tmp_path):
    pq.write_table(pa.table({"query_id": ["q1"]}), tmp_path / "queries.parquet")
    table = tmp_path / "corpus" / "published_date=2024-05-01"
    table.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), table / "part.parquet")
    (tmp_path / "loose").mkdir()
    pq.write_table(pa.table({"x": [1]}), tmp_path / "loose" / "mine.parquet")
    (tmp_path / "notes.txt").write_text("mine")
    for out, why in [
        (tmp_path / "corpus", "not a hit table"),
        (tmp_path / "loose", "not a hit table"),  # flat Parquet, but not of the hit columns
        (tmp_path / "notes.txt", "is a file"),
        (tmp_path, "holds --queries"),
        (root, "holds --root"),
    ]:
        with pytest.raises(InputError, match=why):
            retrieve.run(retrieve.Config(root=root, queries=str(tmp_path / "queries.parquet"), out=str(out)))
    assert (table / "part.parquet").exists() and (tmp_path / "loose" / "mine.parquet").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "queries.parquet").exists()


def test_strict_statistics_have_one_row_per_day_and_term_whatever_the_batches(tmp_path, ray_local):
    """A day spread over several embedding batches is still counted whole: one ``term_days`` row per
    day and term, one ``day_sizes`` row per day (per batch, a day of B batches had B rows a term)."""
    root = str(tmp_path)
    busy = DAY - dt.timedelta(days=5)
    rows = ROWS + [
        (f"x{n}", busy + dt.timedelta(hours=n), "Ferry harbour", "The ferry harbour again.")
        for n in range(1, 13)
    ]
    write_articles(root, rows)
    summary = run(Config(root=root, encoder=ENCODER, passage_words=(), batch_size=2))
    index = ArticleIndex(root)
    term_days = index.db.open_table("term_days").to_arrow()
    keys = list(zip(term_days["published_date"].to_pylist(), term_days["term"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys))
    assert dict(zip(keys, term_days["df"].to_pylist(), strict=True))[(busy.date(), "ferry")] == 13
    sizes = index.db.open_table("day_sizes").to_arrow().to_pylist()
    assert sorted(r["published_date"] for r in sizes) == sorted({w.date() for _, w, _, _ in rows if w})
    assert {r["published_date"]: r["docs"] for r in sizes}[busy.date()] == 13
    hits = index.search(QUERY, DAY, k=20, mode="bm25", strict=True)
    assert {h.doc_id: pytest.approx(h.score) for h in hits} == by_hand(rows, QUERY, DAY)
    assert summary.metrics["term_days rows written"] == len(keys)
    # a rerun after the busy day's partition was rewritten (one article now) replaces its rows
    write_articles(root, [("x99", busy + dt.timedelta(hours=20), "Ferry", "Ferry again.")])
    run(Config(root=root, encoder=ENCODER, passage_words=(), batch_size=2))
    again = index.db.open_table("term_days").to_arrow()
    keys = list(zip(again["published_date"].to_pylist(), again["term"].to_pylist(), strict=True))
    assert len(keys) == len(set(keys))
    assert {t for d, t in keys if d == busy.date()} == {"ferry", "again"}
    sizes = index.db.open_table("day_sizes").to_arrow().to_pylist()
    assert [r["docs"] for r in sizes if r["published_date"] == busy.date()] == [1]
