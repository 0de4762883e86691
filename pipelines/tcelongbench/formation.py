"""S1 — temporal complex events: read the articles, pre-clean, embed, cluster, filter by span,
apply the demo limits (``--limit`` TCEs, ``--max-articles-per-day``). Every article that does not
end in a TCE is a rejected row with its reason."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pipelines.llm.ledger import Ledger
from pipelines.tcelongbench.config import Config
from udfs.embeddings import embed
from udfs.schemas import ARTICLES
from udfs.tcelongbench import tce
from udfs.text import first_words


@dataclass
class Events:
    """The TCEs of a run, their ``tce_article`` rows and the articles those rows name."""

    tces: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    articles: dict[str, dict[str, Any]]
    max_words: int
    by_id: dict[str, dict[str, Any]] = field(init=False)
    members: dict[tuple[str, int], list[str]] = field(init=False)  # (tce_id, k) -> article ids

    def __post_init__(self) -> None:
        self.by_id = {t["tce_id"]: t for t in self.tces}
        self.members = defaultdict(list)
        for row in self.rows:
            self.members[(row["tce_id"], row["k"])].append(row["article_id"])

    def text(self, article_id: str) -> str:
        """An article's text as every prompt shows it: its first ``max_words`` words."""
        return first_words(self.articles[article_id]["text"], self.max_words)


def form_tces(config: Config, ledger: Ledger) -> Events:
    """The TCEs of the articles under the root, with one rejected row per article left out."""
    step = ledger.step("tce_formation")
    records = ARTICLES.read(config.root).to_pylist()
    topic = tce.TopicFilter(config.topic_keywords, config.topic_hosts)
    kept, rejects = tce.preclean(records, topic, config.min_chars, config.languages)
    vectors = embed([tce.embed_text(a) for a in kept], config.encoder)
    features = tce.cluster_features(
        vectors, [a["date"] for a in kept], config.time_weight, config.time_scale_days
    )
    labels = tce.cluster_labels(features, config.min_cluster_size, config.min_samples)
    tces, tce_articles, cluster_rejects = tce.form_tces(
        kept, labels, topic.key, config.min_span_days, config.max_span_days
    )
    tces, tce_articles, limited = tce.limit_tces(
        tces, tce_articles, config.limit, config.max_articles_per_day
    )
    for article, reason in rejects + cluster_rejects:
        ledger.drop(step, reason, unit="article", item_id=article["article_id"])
    for row, reason in limited:
        ledger.drop(step, reason, unit="article", item_id=row["article_id"], parent_id=row["tce_id"])
    ledger.keep(step, len(tce_articles))
    if step.rows_read != len(records):
        raise AssertionError(f"tce_formation: {len(records)} articles read, {step.rows_read} accounted for")
    step.metrics.update(tces=len(tces), clusters=len({int(x) for x in labels} - {tce.NOISE}))
    ledger.close(step)
    used = {r["article_id"] for r in tce_articles}
    articles = {a["article_id"]: a for a in kept if a["article_id"] in used}
    return Events(tces, tce_articles, articles, config.max_article_words)
