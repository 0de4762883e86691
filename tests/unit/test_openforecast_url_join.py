"""OpenForecast's join of portal source URLs to corpus articles: the two-pass read returns exactly
the articles a one-pass filter would, undated ones included."""

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.openforecast.collect import ARTICLE_COLUMNS, _articles_at
from udfs import storage
from udfs.schemas import ARTICLES


def _row(day: dt.date | None, n: int) -> dict:
    url = f"https://news.example/{day}/{n}"
    return {
        "article_id": f"{day}-{n}",
        "url": url,
        "canonical_url": url,
        "host": "news.example",
        "title": f"Story {n}",
        "text": f"Text {day} {n}.",
        "published_at": None if day is None else dt.datetime.combine(day, dt.time(9), dt.UTC),
        "n_chars": 12,
        "text_hash": f"h{day}{n}",
        "language": "en",
        "extractor": "test",
        "published_date": day,
    }


def test_the_two_pass_join_returns_exactly_the_articles_at_the_urls(tmp_path):
    root = str(tmp_path)
    days = [dt.date(2023, 5, d) for d in (1, 2, 3)] + [None]
    rows = [_row(day, n) for day in days for n in range(3)]
    storage.write_dataset(
        pa.Table.from_pylist(rows, schema=ARTICLES.schema), ARTICLES.uri(root), ["published_date"]
    )
    urls = [
        rows[0]["canonical_url"],
        rows[4]["canonical_url"],
        rows[10]["canonical_url"],
        "https://absent.example/x",
    ]

    got = _articles_at(root, urls)

    one_pass = ARTICLES.read(
        root, columns=ARTICLE_COLUMNS, filter=pc.field("canonical_url").isin(pa.array(urls))
    )
    assert got.column_names == ARTICLE_COLUMNS
    assert sorted(got.column("article_id").to_pylist()) == sorted(one_pass.column("article_id").to_pylist())
    assert sorted(got.column("article_id").to_pylist()) == sorted(rows[i]["article_id"] for i in (0, 4, 10))
    assert _articles_at(root, ["https://absent.example/x"]).num_rows == 0
