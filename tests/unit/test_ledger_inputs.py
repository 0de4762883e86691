"""``Ledger.inputs``: corpus tables checked before any work; empty tables are fine and noted."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StageRunner
from udfs import storage
from udfs.cli import InputError
from udfs.schemas import ARTICLES, WCEP_EVENTS, WIKI_PAGES


def ledger(root: str) -> Ledger:
    return Ledger(StageRunner(root, "b", LLMConfig(backend="scripted", script={})))


def test_missing_tables_are_named_before_any_work(tmp_path):
    with pytest.raises(InputError, match="missing corpus/articles under"):
        ledger(str(tmp_path)).inputs(ARTICLES)
    with pytest.raises(InputError, match="does not exist"):
        ledger(str(tmp_path / "typo_dir")).inputs(ARTICLES)


def test_an_empty_table_is_fine_and_the_summary_says_so(tmp_path):
    storage.write_dataset(ARTICLES.schema.empty_table(), ARTICLES.uri(str(tmp_path)))
    row = {f.name: None for f in WCEP_EVENTS.schema}
    row |= {"event_id": "e", "position": 0, "text": "t", "source_format": "html", "date": None}
    table = pa.Table.from_pylist([row], schema=WCEP_EVENTS.file_schema.append(pa.field("date", pa.date32())))
    storage.write_dataset(table.drop_columns(["date"]), WCEP_EVENTS.uri(str(tmp_path)))
    book = ledger(str(tmp_path))
    present = book.inputs(ARTICLES, WCEP_EVENTS, WIKI_PAGES, any_of=True)
    assert present == [ARTICLES, WCEP_EVENTS]
    (step,) = book.summaries
    assert step.metrics == {"articles rows": 0, "wcep_events rows": 1}
    assert step.notes == ["corpus/articles exists but is empty", "corpus/wiki_pages is absent"]
    assert step.reconciles
