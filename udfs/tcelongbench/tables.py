"""The benchmark's name, its three tasks and the Arrow schemas of its output tables
(``benchmarks/tcelongbench/<table>``; ``docs/tcelongbench.md`` describes every column)."""

from __future__ import annotations

import pyarrow as pa

NAME = "tcelongbench"
DETAIL, ORDER, FORECAST = "detail", "order", "forecast"

STR, DATE, INT, FLT = pa.string(), pa.date32(), pa.int32(), pa.float64()


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields])


TCE = _schema(
    ("tce_id", STR), ("partition_key", STR), ("n", INT), ("span_days", INT), ("n_articles", INT),
    ("dates", pa.list_(DATE)), ("start_date", DATE), ("end_date", DATE), ("split", STR),
)  # fmt: skip
TCE_ARTICLE = _schema(("tce_id", STR), ("article_id", STR), ("date", DATE), ("k", INT))
CONTEXT = _schema(("tce_id", STR), ("article_id", STR), ("date", DATE), ("k", INT), ("cutoff_date", DATE))
DAY_SUMMARY = _schema(
    ("day_id", STR), ("tce_id", STR), ("k", INT), ("date", DATE), ("summary", STR), ("source", STR),
    ("n_summaries", INT),
)  # fmt: skip
KEY_POINT = _schema(
    ("kp_id", STR), ("tce_id", STR), ("k", INT), ("date", DATE), ("j", INT), ("text", STR), ("status", STR),
    ("dup_of", STR), ("max_sim_earlier", FLT), ("mean_sim_kept", FLT), ("gold_article_id", STR), ("gold_sim", FLT),
)  # fmt: skip
_QA_COMMON = [
    ("qa_id", STR), ("tce_id", STR), ("split", STR), ("task", STR), ("cutoff_date", DATE), ("t_n", DATE),
    ("question", STR), ("choices", pa.list_(STR)), ("choice_types", pa.list_(STR)), ("answer_letter", STR),
    ("gold", STR), ("kp_ids", pa.list_(STR)), ("key_point", STR), ("gold_article_id", STR), ("gold_date", DATE),
    ("background2_article_id", STR), ("background2_date", DATE), ("evidence_sentence", STR), ("evidence_match", FLT),
]  # fmt: skip
QA_DETAIL = _schema(*_QA_COMMON)
QA_FORECAST = _schema(*_QA_COMMON, ("open_answer", STR), ("votes", pa.list_(STR)), ("votes_passed", INT))
QA_ORDER = _schema(
    ("qa_id", STR), ("tce_id", STR), ("split", STR), ("task", STR), ("cutoff_date", DATE), ("t_n", DATE), ("entity", STR),
    ("choices", pa.list_(STR)), ("kp_ids", pa.list_(STR)), ("choice_dates", pa.list_(DATE)), ("gold_order", STR),
    ("gold_dates", pa.list_(DATE)), ("votes", pa.list_(STR)), ("votes_passed", INT),
)  # fmt: skip
