"""ForecastQA's retrievers on the article index: title-boosted BM25 (a title match counts 1.25×,
best field wins) and DrQA-style TF-IDF (equal to TF-IDF computed by hand over the window, the
cutoff inside the engine query); an index built before the title index asks for an update, and
the update adds it."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import pytest

from pipelines.index import engine
from pipelines.index.build import run
from pipelines.index.config import Config
from pipelines.index.engine import TITLE_BOOST, ArticleIndex, has_title_index
from tests.fixtures.evaluate.data import write_articles
from udfs.cli import InputError
from udfs.index_docs import terms
from udfs.retrieval import LeakageError

DAY = dt.datetime(2019, 4, 10, tzinfo=dt.UTC)
# "glacier" once in each of the two: in the title of one, in the body of the other; both index
# texts (title + lead) hold the same words, so their text BM25 is equal
TITLE_MATCH = ("in-title", DAY - dt.timedelta(days=3), "Glacier report", "Scientists met to discuss funding.")
BODY_MATCH = ("in-body", DAY - dt.timedelta(days=2), "Funding report", "Scientists met to discuss glacier.")
OTHERS = [
    ("ferry-1", DAY - dt.timedelta(days=9), "Ferry strike", "The ferry strike closed the harbour."),
    (
        "ferry-2",
        DAY - dt.timedelta(days=6),
        "Harbour budget",
        "The harbour budget grew and the ferry fleet too.",
    ),
    ("ferry-3", DAY - dt.timedelta(days=5), "Ferry timetable", "Ferry ferry timetable changes for summer."),
    ("ferry-4", DAY - dt.timedelta(days=4), "Harbour crane", "A crane for the harbour was delivered."),
    ("rail", DAY - dt.timedelta(days=1), "Rail news", "A new rail line opens in the valley."),
    ("council", DAY - dt.timedelta(days=8), "Council vote", "The council voted on the school budget."),
]
# more late articles than k, each matching the query more than any eligible one
LATE = [
    (f"late-{n}", DAY + dt.timedelta(hours=n), "Ferry harbour ferry", "Ferry harbour ferry harbour ferry.")
    for n in range(6)
]
ROWS = [TITLE_MATCH, BODY_MATCH, *OTHERS, *LATE]
QUERY = "ferry harbour budget"
ENCODER = "hashing-384"  # the vectors are not what these tests search


@pytest.fixture(scope="module")
def root(tmp_path_factory, ray_local) -> str:
    root = str(tmp_path_factory.mktemp("forecastqa_index"))
    write_articles(root, ROWS)
    run(Config(root=root, encoder=ENCODER, passage_words=()))
    return root


def bm25_by_hand(field: list[list[str]], doc: list[str], term: str) -> float:
    """One term's BM25 (k1 1.2, b 0.75, Lucene IDF) of ``doc`` among the documents ``field``."""
    n, df = len(field), sum(term in d for d in field)
    avgdl = sum(map(len, field)) / n
    tf = doc.count(term)
    return (
        math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(doc) / avgdl))
    )


def test_a_title_match_counts_1_25_times_and_the_best_field_wins(root):
    index = ArticleIndex(root)
    plain = {h.doc_id: h.score for h in index.search("glacier", DAY, 10, "bm25")}
    assert set(plain) == {"in-title", "in-body"} and plain["in-title"] == pytest.approx(plain["in-body"])
    boosted = index.search("glacier", DAY, 10, "bm25_title")
    assert [h.doc_id for h in boosted] == ["in-title", "in-body"]
    # the title field: every indexed title, tokenised as the simple analyzer does
    titles = [terms(title) for _, _, title, _ in ROWS]
    title_score = bm25_by_hand(titles, terms(TITLE_MATCH[2]), "glacier")
    assert TITLE_BOOST == 1.25 and 1.25 * title_score > plain["in-title"]  # the title is the best field
    scores = {h.doc_id: h.score for h in boosted}
    assert scores["in-title"] == pytest.approx(1.25 * title_score, rel=1e-4)  # the max, not a sum
    assert scores["in-body"] == pytest.approx(plain["in-body"])  # no title match: its text score


def tfidf_by_hand(query: str, cutoff: dt.datetime) -> dict[str, float]:
    """DrQA's TF-IDF dot product over the index texts of the articles before ``cutoff``."""
    docs = {i: Counter(terms(f"{title} {text}")) for i, when, title, text in ROWS if when < cutoff}
    n, scores = len(docs), {}
    for i, counts in docs.items():
        score = 0.0
        for term, qtf in Counter(terms(query)).items():
            df = sum(1 for c in docs.values() if c[term])
            idf = max(0.0, math.log((n - df + 0.5) / (df + 0.5)))
            score += math.log(1 + qtf) * math.log(1 + counts[term]) * idf * idf
        if score > 0:
            scores[i] = score
    return scores


def test_tfidf_equals_tfidf_by_hand_over_the_window(root):
    expected = tfidf_by_hand(QUERY, DAY)
    assert len(expected) >= 3 and len(set(expected.values())) == len(expected)  # a strict order
    hits = ArticleIndex(root).search(QUERY, DAY, 10, "tfidf")
    assert [h.doc_id for h in hits] == sorted(expected, key=lambda i: -expected[i])
    assert [h.score for h in hits] == pytest.approx(sorted(expected.values(), reverse=True))


def test_tfidf_keeps_the_cutoff_inside_the_engine_query(root, monkeypatch):
    """A pool of exactly k: were the cutoff applied after the engine's top-k, the late articles
    (better matches, more of them than k) would fill the pool and none would be left."""
    monkeypatch.setattr(engine, "pool_size", lambda k: k)
    expected = tfidf_by_hand(QUERY, DAY)
    index = ArticleIndex(root)
    hits = index.search(QUERY, DAY, 3, "tfidf")
    assert len(hits) == 3 and all(h.published_at < DAY for h in hits)
    # the whole pool ranks the same as the hand computation (every eligible match fits in 10)
    many = index.search_many([(QUERY, DAY, None)], 10, "tfidf", text=False)[0]
    assert [h.doc_id for h in many] == sorted(expected, key=lambda i: -expected[i])
    assert all(h.text is None for h in many)
    assert index.count(DAY) == len(ROWS) - len(LATE)


@pytest.mark.parametrize("mode", ["bm25_title", "tfidf"])
def test_a_late_hit_is_caught_by_the_assertion(root, monkeypatch, mode):
    monkeypatch.setattr(engine, "eligible", lambda *a, **k: "true")  # the prefilter lost
    with pytest.raises(LeakageError):
        ArticleIndex(root).search(QUERY, DAY, 10, mode)
    with pytest.raises(LeakageError):
        ArticleIndex(root).search_many([(QUERY, DAY, None)], 10, mode)


def test_bm25_title_and_tfidf_refuse_what_they_cannot_do(root):
    index = ArticleIndex(root)
    with pytest.raises(ValueError, match="no strict form"):
        index.search("glacier", DAY, 3, "bm25_title", strict=True)
    assert [h.doc_id for h in index.search(QUERY, DAY, 3, "tfidf", strict=True)] == [
        h.doc_id for h in index.search(QUERY, DAY, 3, "tfidf")
    ]


def test_an_index_without_a_title_index_asks_for_an_update_which_adds_it(tmp_path, ray_local):
    root = str(tmp_path)
    write_articles(root, ROWS)
    run(Config(root=root, encoder=ENCODER, passage_words=()))
    ArticleIndex(root).table.drop_index("title_idx")  # as an index built before bm25_title
    old = ArticleIndex(root)
    assert not has_title_index(old.table)
    with pytest.raises(InputError, match=f"run python -m pipelines.index --root {root}"):
        old.search("glacier", DAY, 3, "bm25_title")
    assert old.search("glacier", DAY, 3, "bm25")  # the other modes still work
    summary = run(Config(root=root, encoder=ENCODER, passage_words=()))
    assert summary.rows_written == 0 and summary.metrics["partitions changed"] == 0
    assert has_title_index(ArticleIndex(root).table)
    assert [h.doc_id for h in ArticleIndex(root).search("glacier", DAY, 3, "bm25_title")] == [
        "in-title",
        "in-body",
    ]
