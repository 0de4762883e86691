"""The builders' inputs that the synthetic article corpus does not hold, written beside it.

* ``corpus/wcep_events``: three WCEP stories of five portal events each, on fixed days of the
  span (one story per OpenForecast split of ``TEST_START``); each event cites the first article
  (lowest ``article_id``) published on its day, so OpenForecast joins real corpus rows;
* ``corpus/wiki_pages``: two event pages (a year category, Background/Aftermath sections, a date
  in the lead) of words from the corpus vocabulary;
* ``inputs/questions.jsonl``: three resolved binary questions (PROPHET's input, and plain
  question items for the evaluation), their text made of corpus content words so that searches
  find articles.

Everything here is small and has the same size whatever the article count: only the articles an
event cites change with the corpus, never how many there are.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.synthetic import draw_queries, vocabulary
from udfs import storage
from udfs.ids import stable_id
from udfs.schemas import ARTICLES, WCEP_EVENTS, WIKI_PAGES

TEST_START = dt.date(2023, 3, 1)  # train to 2022-12-31, dev Jan-Feb 2023, test Mar-Sep 2023
EVENTS_PER_STORY = 5
STORIES = {  # story -> its first portal day (events every third day)
    "Synthetic harbour dispute": dt.date(2022, 3, 1),
    "Synthetic election crisis": dt.date(2023, 1, 9),
    "Synthetic flood response": dt.date(2023, 4, 3),
}
WIKI_TITLES = {"2022 Synthetic summit": dt.date(2022, 5, 10), "2021 Synthetic strike": dt.date(2021, 9, 20)}
QUESTION_DAYS = (dt.date(2022, 3, 15), dt.date(2022, 9, 15), dt.date(2023, 3, 15))
FREEZE = dt.timedelta(days=30)  # a question's freeze time: this long before it resolves
DUMP = "synthetic_wiki"


def story_keys() -> tuple[str, ...]:
    return tuple(STORIES)


def hosts() -> tuple[str, ...]:
    """Every publisher of the synthetic corpus (Daily Oracle keeps only allowed hosts)."""
    return tuple(vocabulary().hosts.tolist())


def write_inputs(root: str, seed: int) -> dict[str, Any]:
    """Write the three inputs under ``root`` (after its corpus); returns what was written."""
    cited = _write_wcep(root)
    pages = _write_wiki(root, seed)
    questions = write_questions(questions_uri(root), seed)
    return {
        "wcep_events": len(cited),
        "cited_in_corpus": sum(url is not None for url in cited),
        "wiki_pages": pages,
        "questions": questions,
    }


def questions_uri(root: str) -> str:
    return storage.join(root, "inputs", "questions.jsonl")


def _first_url(dataset, day: dt.date) -> str | None:
    """The canonical URL of the first article (by id) published on ``day``."""
    table = dataset.to_table(
        columns=["article_id", "canonical_url"],
        filter=pc.field("published_date") == pa.scalar(day, pa.date32()),
    )
    if not table.num_rows:
        return None
    return table.sort_by("article_id")["canonical_url"][0].as_py()


def _write_wcep(root: str) -> list[str | None]:
    dataset = ARTICLES.dataset(root)
    rows, cited = [], []
    for story, start in STORIES.items():
        for i in range(EVENTS_PER_STORY):
            day = start + dt.timedelta(days=3 * i)
            url = _first_url(dataset, day)
            cited.append(url)
            text = f"{story}: development number {i + 1} is reported by officials."
            rows.append(
                {
                    "event_id": stable_id(day.isoformat(), i, text),
                    "position": 0,
                    "category": "Politics and elections",
                    "story_path": [story],
                    "story_links": [story],
                    "text": text,
                    "source_urls": [url or f"https://missing.example/{day}"],
                    "source_names": ["Synthetic"],
                    "source_format": "wikitext",
                    "page_title": f"Portal:Current events/{day:%Y %B} {day.day}",
                    "date": day,
                }
            )
    table = pa.Table.from_pylist(rows, schema=WCEP_EVENTS.schema)
    storage.write_dataset(table, WCEP_EVENTS.uri(root), WCEP_EVENTS.partition_cols, replace="all")
    return cited


def _text(rng: np.random.Generator, n: int) -> str:
    return " ".join(vocabulary().tokens(rng, n).tolist())


def _write_wiki(root: str, seed: int) -> int:
    rng = np.random.default_rng([seed, 14])
    rows = []
    for page_id, (title, day) in enumerate(WIKI_TITLES.items(), 1):
        lead = f"The {title} began on {day.isoformat()}. {_text(rng, 60)}"
        sections = [
            {"level": 2, "title": name, "text": f"On {day + dt.timedelta(days=k)} {_text(rng, 120)}"}
            for k, name in enumerate(("Background", "Events", "Aftermath"))
        ]
        n_words = len(lead.split()) + sum(len(s["text"].split()) for s in sections)
        rows.append(
            {
                "page_id": page_id,
                "title": title,
                "ns": 0,
                "revision_id": page_id,
                "revision_time": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
                "is_redirect": False,
                "redirect_target": None,
                "lead": lead,
                "sections": sections,
                "categories": [f"{day.year} events", "Synthetic events"],
                "n_words": n_words,
                "dump": DUMP,
            }
        )
    table = pa.Table.from_pylist(rows, schema=WIKI_PAGES.schema)
    storage.write_dataset(table, WIKI_PAGES.uri(root), WIKI_PAGES.partition_cols, replace="all")
    return len(rows)


def write_questions(uri: str, seed: int) -> int:
    """Resolved binary questions on corpus content words, as JSON lines; returns their count."""
    lines = []
    for n, (query, day) in enumerate(zip(draw_queries(len(QUESTION_DAYS), seed), QUESTION_DAYS, strict=True)):
        topic = query.text
        lines.append(
            json.dumps(
                {
                    "id": f"synthetic-{n}",
                    "question": f"Will the {topic} talks reach an agreement before {day.isoformat()}?",
                    "background": f"Reports on the {topic} talks have appeared for months.",
                    "resolution_criteria": f"Resolves Yes if an agreement on {topic} is announced.",
                    "resolution_date": day.isoformat(),
                    "freeze_at": (dt.datetime.combine(day, dt.time(), dt.UTC) - FREEZE).isoformat(),
                    "answer": n % 2,
                }
            )
        )
    storage.write_bytes(uri, ("\n".join(lines) + "\n").encode())
    return len(lines)
