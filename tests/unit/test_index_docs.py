"""udfs.index_docs: what an index document holds and the engine's cutoff prefilter."""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pyarrow as pa
import pytest

from udfs.cli import InputError
from udfs.embeddings import DEFAULT_ENCODER, bundled_encoder_path, embed, load_encoder
from udfs.index_docs import check_partitions, cutoff_filter, documents, eligible, pack_passages, quoted_list


def test_documents_keep_dated_articles_with_title_and_lead():
    when = dt.datetime(2024, 3, 1, 23, 30, tzinfo=dt.UTC)
    batch = pa.table(
        {
            "article_id": ["a", "b", "c"],
            "published_at": pa.array([when, None, when], pa.timestamp("us", tz="UTC")),
            "host": ["x.org", "y.org", "z.org"],
            "title": ["Storm", "Undated", None],
            "text": ["one two three four", "text", "alpha beta"],
            "near_duplicate_of": [None, None, "a"],
        }
    )
    docs = documents(batch, lead_words=2)
    assert docs["article_id"].to_pylist() == ["a", "c"]
    assert docs["text"].to_pylist() == ["Storm. one two", "alpha beta"]  # as TCE formation embeds it
    assert docs["published_date"].to_pylist() == [dt.date(2024, 3, 1)] * 2
    assert docs["near_duplicate_of"].to_pylist() == [None, "a"]


def test_an_article_outside_its_utc_days_partition_is_an_error():
    """Half an hour before midnight at -02:00 is the next UTC day: an importer that filed it under
    its local date would leave it behind when the index replaces that day's rows."""
    late_evening = dt.datetime(2024, 3, 1, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-2)))
    batch = pa.table(
        {
            "article_id": ["fine", "undated", "misfiled"],
            "published_at": pa.array(
                [dt.datetime(2024, 3, 1, 9, tzinfo=dt.UTC), None, late_evening], pa.timestamp("us", tz="UTC")
            ),
            "path": ["bucket/corpus/articles/published_date=2024-03-01/part-0.parquet"] * 3,
        }
    )
    assert check_partitions(batch.slice(0, 2)).column_names == ["article_id", "published_at"]
    with pytest.raises(InputError, match=r"1 article\(s\).* misfiled published 2024-03-02T01:30:00\+00:00"):
        check_partitions(batch)


def test_cutoff_filters_are_utc_to_the_microsecond():
    aware = dt.datetime(2024, 3, 1, 14, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert "'2024-03-01T12:00:00.000005Z'" in cutoff_filter(aware)
    assert "'2024-03-01T00:00:00.000000Z'" in cutoff_filter(dt.date(2024, 3, 1))
    both = cutoff_filter(dt.datetime(2024, 3, 1), since=dt.date(2024, 2, 1))
    assert both.startswith("published_at < ") and " AND published_at >= " in both
    assert quoted_list(["a", "o'b"]) == "'a', 'o''b'"


def test_the_prefilter_carries_every_bound():
    where = eligible(dt.date(2024, 3, 1), exclude={"g'1"}, within={"a", "b"}, distinct=True)
    assert "published_at < " in where and "article_id NOT IN ('g''1')" in where
    assert "article_id IN ('a', 'b')" in where and where.endswith("near_duplicate_of IS NULL")


def test_hashing_encoder_is_deterministic_and_normalised():
    vectors = embed(["Storm storm harbour", "storm harbour storm", "", "budget"], "hashing-64")
    assert vectors.shape == (4, 64)
    assert np.allclose(vectors[0], vectors[1]) and not vectors[2].any()
    assert np.allclose(np.linalg.norm(vectors[[0, 3]], axis=1), 1.0)
    assert float(vectors[0] @ vectors[3]) < 0.5


def test_no_input_gives_no_rows_of_the_encoders_width_without_a_warning():
    """The bundled MiniLM, asked for nothing: (0, 384), run directly and through
    sentence-transformers (named by its path), whose current name for the width is used (the old
    one warns on every call, in every embedding actor's log)."""
    load_encoder(bundled_encoder_path())  # loading may warn on its own account
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert embed([], DEFAULT_ENCODER).shape == (0, 384) == embed([], bundled_encoder_path()).shape


def test_passages_pack_whole_paragraphs_and_split_long_ones():
    text = "one two\nthree four five\n\nsix\n" + " ".join(f"w{i}" for i in range(7))
    assert pack_passages(text, 5) == ["one two three four five", "six", "w0 w1 w2 w3 w4", "w5 w6"]
    assert pack_passages("", 5) == [] and pack_passages("a b", 5) == ["a b"]
