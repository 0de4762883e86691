"""TCE formation on months of interleaved coverage (``tce_stories``: six stories, each covered
every day for 95–120 days): every story is split into TCEs of 5–30 days, each TCE inside one
story, and most articles end in a TCE. Before over-long clusters were split, a story's coverage
was one cluster of 70–120 days: 905 of the 1,276 articles were ``tce_span_too_long``, 5 TCEs were
left and 3 stories had none."""

from __future__ import annotations

from collections import Counter, defaultdict

import pyarrow as pa
import pytest

from pipelines.index import build as index_build
from pipelines.index.config import Config as IndexConfig
from pipelines.llm.config import LLMConfig
from pipelines.llm.ledger import Ledger
from pipelines.llm.stage import StageRunner
from pipelines.tcelongbench import Config
from pipelines.tcelongbench.formation import form_tces
from tests.pipelines import tce_stories
from udfs import storage
from udfs.ids import stable_id
from udfs.schemas import ARTICLES

pytestmark = [pytest.mark.ray]
ENCODER = "hashing-384"  # the stories share their filler and templates; the index's cheap encoder


@pytest.fixture(scope="module")
def stories(tmp_path_factory, ray_local) -> tuple[str, dict[str, str]]:
    """A root holding the story corpus and its index; the story of each article id."""
    root = str(tmp_path_factory.mktemp("tce_stories"))
    articles = tce_stories.articles(seed=3)
    rows = [
        {
            "article_id": a["article_id"],
            "url": f"https://news.example/{a['story'].replace(' ', '-')}/{a['article_id']}",
            "canonical_url": f"https://news.example/{a['story'].replace(' ', '-')}/{a['article_id']}",
            "host": "news.example",
            "title": a["title"],
            "text": a["text"],
            "published_at": a["published_at"],
            "date_source": "published",
            "language": "en",
            "n_chars": len(a["text"]),
            "text_hash": stable_id(a["text"]),
            "extractor": "jsonl",
            "published_date": a["published_at"].date(),
        }
        for a in articles
    ]
    table = pa.Table.from_pylist(rows, schema=ARTICLES.schema)
    storage.write_dataset(table, ARTICLES.uri(root), ARTICLES.partition_cols)
    index_build.run(IndexConfig(root=root, encoder=ENCODER, passage_words=()))
    return root, {a["article_id"]: a["story"] for a in articles}


def test_months_of_interleaved_stories_become_pure_tces_of_5_to_30_days(stories):
    root, story_of = stories
    config = Config(root=root, encoder=ENCODER, min_chars=0)
    ledger = Ledger(StageRunner(root, "tcelongbench", LLMConfig(backend="scripted", script={})))
    events = form_tces(config, ledger)
    (step,) = ledger.summaries

    members = defaultdict(list)
    for row in events.rows:
        members[row["tce_id"]].append(story_of[row["article_id"]])
    purity = {t: Counter(s).most_common(1)[0][1] / len(s) for t, s in members.items()}
    story_of_tce = {t: Counter(s).most_common(1)[0][0] for t, s in members.items()}
    tces_of = Counter(story_of_tce.values())

    assert step.reconciles and step.metrics["clusters_split"] >= len(tce_stories.STORIES)
    assert all(5 <= t["span_days"] <= 30 and t["n"] >= 2 for t in events.tces)
    assert set(tces_of) == {s.name for s in tce_stories.STORIES}
    assert all(tces_of[s.name] >= s.days // 31 for s in tce_stories.STORIES)  # a sequence each
    assert min(purity.values()) >= 0.9, purity
    assert len(events.rows) >= len(story_of) / 2, step.rejected
    assert not step.rejected["tce_span_too_long"]
    assert events.report["tces"] == len(events.tces) and events.report["windows"] == 2  # the card's report
