"""udfs.index_docs: what an index document holds and the engine's cutoff prefilter."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from udfs.index_docs import cutoff_filter, documents, quoted_list


def test_documents_keep_dated_articles_with_title_and_lead():
    when = dt.datetime(2024, 3, 1, 23, 30, tzinfo=dt.UTC)
    batch = pa.table(
        {
            "article_id": ["a", "b", "c"],
            "published_at": pa.array([when, None, when], pa.timestamp("us", tz="UTC")),
            "host": ["x.org", "y.org", "z.org"],
            "title": ["Storm", "Undated", None],
            "text": ["one two three four", "text", "alpha beta"],
        }
    )
    docs = documents(batch, lead_words=2)
    assert docs["article_id"].to_pylist() == ["a", "c"]
    assert docs["text"].to_pylist() == ["Storm one two", "alpha beta"]
    assert docs["published_date"].to_pylist() == [dt.date(2024, 3, 1)] * 2


def test_cutoff_filters_are_utc_to_the_microsecond():
    aware = dt.datetime(2024, 3, 1, 14, 0, 0, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert "'2024-03-01T12:00:00.000005Z'" in cutoff_filter(aware)
    assert "'2024-03-01T00:00:00.000000Z'" in cutoff_filter(dt.date(2024, 3, 1))
    both = cutoff_filter(dt.datetime(2024, 3, 1), since=dt.date(2024, 2, 1))
    assert both.startswith("published_at < ") and " AND published_at >= " in both
    assert quoted_list(["a", "o'b"]) == "'a', 'o''b'"
