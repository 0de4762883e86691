"""The example builder: its outputs and its one declaration (``BUILDER``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from pipelines.builders import Build, Builder, Demo, Inputs, Outputs, Result
from pipelines.evaluate.context import RetrievalConfig
from tests.example_builder.config import NAME, Config
from tests.example_builder.state import State
from tests.example_builder.steps import ask, headlines
from udfs.audit import EventKey
from udfs.eval_items import YES_NO
from udfs.schemas import ARTICLES

TEST_FROM = dt.date(2024, 4, 1)  # questions about articles from this day on are the test split


def finish(b: Build[Config], s: State) -> Outputs:
    """The ``questions`` table, one yes/no item per question (its cutoff: the start of its
    article's day) and the card's counts."""
    rows = [
        {
            "question_id": f"q-{q['article_id']}",
            "article_id": q["article_id"],
            "split": "test" if q["published_at"].date() >= TEST_FROM else "train",
            "question": q["question"],
            "published_at": q["published_at"],
        }
        for q in s.questions
    ]
    items = [
        {
            "item_id": r["question_id"],
            "benchmark": NAME,
            "task": "headline",
            "split": r["split"],
            "type": "yesno",
            "question": r["question"],
            "choices": YES_NO,
            "gold_index": 0,  # the headline reports it
            "t_cut": dt.datetime.combine(r["published_at"].date(), dt.time(), dt.UTC),
            "gold_article_ids": [r["article_id"]],
            "source_id": r["question_id"],
        }
        for r in rows
    ]

    def counts(written: dict[str, pa.Table], rejected: int) -> dict[str, Any]:
        return {"questions": written["questions"].num_rows, "items": len(items), "rejected": rejected}

    return Outputs({"questions": pa.Table.from_pylist(rows)}, items, counts)


BUILDER = Builder(
    name=NAME,
    config=Config,
    inputs=Inputs((ARTICLES,)),
    state=State,
    steps=(headlines, ask),
    finish=finish,
    tables={"questions": ("split",), "rejected": ()},
    event=EventKey("source article", ("questions",), "question_id", "article_id"),
    retrieval=RetrievalConfig(k=2, doc_words=50),
    demo=Demo("Example (one yes/no question per headline)", ("--limit", "3")),
)


def run(config: Config) -> Result:
    return BUILDER.run(config)
