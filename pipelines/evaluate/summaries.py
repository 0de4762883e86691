"""Article summaries for the settings that show summaries (``RetrievalConfig.summaries``;
PROPHET §5: every article is summarised once, in advance, and every method reads the summaries).

One LLM stage summarises every article that any such item may be shown — its fixed article set
— with the generic news-summary prompt the TCELongBench builder uses (``tcelongbench.article_summary``), by the judge
model, under ``eval/_summaries/<model>/``: every forecaster then reads the same summaries, and a
rerun computes only new ones. An article whose summary fails to parse is shown as its text (the
stage's summary counts those). The article texts are read in a Ray worker, by id.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
import ray

from pipelines.evaluate.context import Corpus
from pipelines.llm.attempts import answer_budget
from pipelines.llm.stage import LLMStage, StageRunner
from udfs.tcelongbench import outputs
from udfs.tcelongbench.outline import parse_summary
from udfs.text import first_words

PROMPT = "tcelongbench.article_summary"
SUMMARY_SCHEMA = pa.schema([pa.field("summary", pa.string())])
INPUT_SCHEMA = pa.schema(
    [pa.field("article_id", pa.string()), pa.field("title", pa.string()), pa.field("text", pa.string())]
)


def summary_stage(max_new_tokens: int | None) -> LLMStage:
    """The summary stage, its answer form narrowed to its token budget."""
    budget = answer_budget(PROMPT, max_new_tokens)
    return LLMStage(
        "article_summary",
        PROMPT,
        parser=parse_summary,
        parsed_schema=SUMMARY_SCHEMA,
        structured={"regex": outputs.summary_regex(budget)},
    )


def _inputs(root: str, ids: list[str], words: int) -> pa.Table:
    """The title and first ``words`` words of each article of ``ids`` that exists (a Ray task)."""
    rows = Corpus(root).articles(ids)
    return pa.Table.from_pylist(
        [
            {"article_id": a, "title": r["title"] or "", "text": first_words(r["text"] or "", words)}
            for a, r in sorted(rows.items())
        ],
        schema=INPUT_SCHEMA,
    )


def summarize(root: str, ids: Collection[str], runner: StageRunner, words: int) -> dict[str, str]:
    """Article id → summary for the articles of ``ids`` (those whose summary parsed)."""
    if not ids:
        return {}
    table = ray.get(ray.remote(_inputs).remote(root, sorted(ids), words))
    out = runner.run(summary_stage(runner.llm.max_new_tokens), table)
    return {r["article_id"]: r["summary"] for r in out.to_pylist() if r["parse_ok"]}
