"""The example builder's two steps: the headlines, then one question per headline."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from pipelines.builders import Build
from pipelines.llm.attempts import BuilderStage
from tests.example_builder.config import Config
from tests.example_builder.state import State
from udfs.llm_parsing import ParseError
from udfs.schemas import ARTICLES

QUESTION_SCHEMA = pa.schema([pa.field("question", pa.string())])


def parse_question(text: str) -> dict[str, str]:
    """The generated question; an answer that is no question is a parse error."""
    question = text.strip()
    if not (question.startswith("Will ") and question.endswith("?")):
        raise ParseError(f"not a yes/no question: {question[:80]!r}")
    return {"question": question}


def question_form(budget: int) -> dict[str, str]:
    """The answer form for ``budget`` tokens: one "Will ...?" line of at most 3 characters a token."""
    return {"regex": f" Will [^\\n?]{{3,{max(3, 3 * budget - 8)}}}\\?"}


QUESTION = BuilderStage(
    "question", "example.question", parser=parse_question, parsed_schema=QUESTION_SCHEMA, form=question_form
)


def headlines(b: Build[Config], s: State) -> None:
    """The dated articles, oldest first (``--limit``: the first N), read as three columns; a title
    shorter than ``--min-title-words`` is a rejected row."""
    table = ARTICLES.read(
        b.config.root,
        columns=["article_id", "title", "published_at"],
        filter=pc.field("published_at").is_valid(),
    ).sort_by([("published_at", "ascending"), ("article_id", "ascending")])
    step = b.ledger.step("headlines")
    for row in table.to_pylist():
        if len((row["title"] or "").split()) < b.config.min_title_words:
            b.ledger.drop(step, "short_title", unit="article", item_id=row["article_id"], detail=row["title"])
        elif b.config.limit is not None and len(s.articles) >= b.config.limit:
            b.ledger.drop(step, "over_limit", unit="article", item_id=row["article_id"])
        else:
            b.ledger.keep(step)
            s.articles.append(row)
    b.ledger.close(step)


def ask(b: Build[Config], s: State) -> None:
    """One question per headline, asked in one batched stage; failed answers are rejected rows."""
    rows = [
        {
            "article_id": a["article_id"],
            "title": a["title"],
            "month_year": a["published_at"].strftime("%B %Y"),
        }
        for a in s.articles
    ]
    out = b.ledger.run(QUESTION, rows, unit="article", id_column="article_id")
    asked = {r["article_id"]: r["question"] for r in out.to_pylist() if r["parse_ok"]}
    s.questions = [{**a, "question": asked[a["article_id"]]} for a in s.articles if a["article_id"] in asked]
