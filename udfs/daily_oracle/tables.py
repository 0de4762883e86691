"""Arrow schemas of the Daily Oracle outputs under ``<root>/benchmarks/daily_oracle/``.

Every table is partitioned by ``date``, the resolution date (= the source article's publication
date), so a day is written, replaced or read on its own. The ``rejected`` table has the one schema
of every builder (``pipelines.llm.ledger.REJECTED_SCHEMA``).
"""

from __future__ import annotations

import pyarrow as pa

UTC_TS = pa.timestamp("us", tz="UTC")

SELECTION_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("title", pa.string()),
        pa.field("published_at", UTC_TS),
        pa.field("selection", pa.string(), nullable=False),  # random | hot_topic | fill
        pa.field("draw_seed", pa.int64(), nullable=False),  # seed of the draw that picked it
        pa.field("cluster_id", pa.int32()),  # hot_topic picks: DBSCAN label and its cluster's stats
        pa.field("cluster_size", pa.int32()),
        pa.field("cluster_mean_dist", pa.float64()),
        pa.field("day_articles", pa.int32()),  # articles of the day that passed the pre-filters
        pa.field("date", pa.date32(), nullable=False),
    ]
)

_QUESTION_FIELDS = [
    pa.field("question_id", pa.string(), nullable=False),
    pa.field("question_index", pa.int8(), nullable=False),  # 1..4 in the step-2 answer
    pa.field("question", pa.string(), nullable=False),
    pa.field("answer", pa.string(), nullable=False),  # TF: Yes/No; MC: the gold letter a..d
    pa.field("category", pa.string(), nullable=False),
    pa.field("category_prob", pa.float64()),  # the chosen label's probability (null: fell back to Other)
    pa.field("time_element", pa.string(), nullable=False),
    pa.field("time_element_end", pa.date32(), nullable=False),
    pa.field("filter_scores", pa.list_(pa.int8()), nullable=False),  # the 7 principles, in order
    pa.field("filter_total", pa.int8(), nullable=False),
    pa.field("filter_raw", pa.string()),  # the judge's block for this question
    pa.field("article_id", pa.string(), nullable=False),
    pa.field("url", pa.string()),
    pa.field("domain", pa.string()),
    pa.field("title", pa.string()),
    pa.field("text", pa.string()),
    pa.field("published_at", UTC_TS),
    pa.field("selection", pa.string()),
    pa.field("summary", pa.string()),
    pa.field("keypoint", pa.string()),
    pa.field("model", pa.string()),
    pa.field("prompt_versions", pa.string()),  # JSON: step -> "<prompt id>@v<version>"
]
_DATE = pa.field("date", pa.date32(), nullable=False)

TF_SCHEMA = pa.schema([*_QUESTION_FIELDS, _DATE])
MC_SCHEMA = pa.schema(
    [
        *_QUESTION_FIELDS,
        pa.field("answer_text", pa.string(), nullable=False),
        pa.field("choice_a", pa.string(), nullable=False),
        pa.field("choice_b", pa.string(), nullable=False),
        pa.field("choice_c", pa.string(), nullable=False),
        pa.field("choice_d", pa.string(), nullable=False),
        pa.field("mc_stem", pa.string(), nullable=False),
        _DATE,
    ]
)
