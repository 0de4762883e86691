"""The synthetic corpus of the benches: deterministic for a seed, in the articles schema, dates in
the span, ~1 % undated, written in chunks that do not change what is written."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench import synthetic
from udfs.schemas import ARTICLES

N = 3000


def read(root: str):
    return ARTICLES.read(root).sort_by("article_id")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("synthetic"))
    return root, synthetic.write_corpus(root, N, seed=7, chunk_articles=1000)


def test_the_articles_schema_and_counts(corpus):
    root, summary = corpus
    table = read(root)
    assert table.schema == ARTICLES.schema
    assert table.num_rows == summary["articles"] == N
    assert summary["chunks"] >= 3  # more articles than one chunk holds
    assert len(table["article_id"].unique()) == N
    assert pc.all(pc.equal(table["n_chars"], pc.utf8_length(table["text"]))).as_py()
    words = pc.list_value_length(pc.utf8_split_whitespace(table["text"]))
    assert pc.min(words).as_py() >= synthetic.MIN_WORDS
    assert pc.max(words).as_py() <= synthetic.MAX_WORDS
    assert pc.min(pc.utf8_length(table["title"])).as_py() > 0
    assert len(table["host"].unique()) > 10


def test_dates_in_the_span_and_one_percent_undated(corpus):
    root, summary = corpus
    table = read(root)
    undated = table.filter(pc.is_null(table["published_at"]))
    assert undated.num_rows == summary["undated"]
    assert 0.005 * N <= undated.num_rows <= 0.02 * N
    assert undated["published_date"].null_count == undated.num_rows
    assert undated["date_source"].null_count == undated.num_rows
    dated = table.filter(pc.is_valid(table["published_at"]))
    published = dated["published_at"].to_pylist()
    assert min(published) >= synthetic.START
    assert max(published) < synthetic.END
    assert max(published) - min(published) > dt.timedelta(days=3 * 365 - 30)
    assert any(p.microsecond % 1000 for p in published)  # microsecond precision
    assert dated["published_date"].to_pylist() == [p.date() for p in published]


def test_deterministic_for_a_seed_whatever_the_chunk_size(corpus, tmp_path):
    root, _ = corpus
    again = str(tmp_path / "again")
    other_chunks = synthetic.write_corpus(again, N, seed=7, chunk_articles=N * 10)
    assert other_chunks["chunks"] == 1
    assert read(again).equals(read(root))
    other_seed = str(tmp_path / "other")
    synthetic.write_corpus(other_seed, N, seed=8, chunk_articles=1000)
    assert read(other_seed)["text"].to_pylist() != read(root)["text"].to_pylist()


def test_a_rewrite_replaces_the_corpus(tmp_path):
    root = str(tmp_path)
    synthetic.write_corpus(root, 500, seed=1)
    synthetic.write_corpus(root, 200, seed=1)
    assert read(root).num_rows == 200


def test_queries_are_content_words_with_cutoffs_in_the_span():
    queries = synthetic.draw_queries(50, seed=3)
    assert queries == synthetic.draw_queries(50, seed=3)
    content = set(synthetic.vocabulary().content.tolist())
    for q in queries:
        words = q.text.split()
        assert 2 <= len(words) <= 6 and len(set(words)) == len(words)
        assert set(words) <= content
        assert synthetic.START <= q.cutoff < synthetic.END and q.cutoff.tzinfo is not None


def test_the_command_writes_a_corpus_and_ends_with_its_summary(tmp_path, capsys):
    synthetic.main(["--root", str(tmp_path), "--articles", "300", "--seed", "2"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    table = pq.read_table(ARTICLES.uri(str(tmp_path)), columns=["published_at"])
    assert summary["articles"] == table.num_rows == 300
    assert summary["undated"] == table["published_at"].null_count and summary["seed"] == 2
