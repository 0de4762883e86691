"""Output schemas of the PROPHET builder (``benchmarks/prophet/<table>``; ``rejected`` has the
one schema of every builder, ``pipelines.llm.ledger.REJECTED_SCHEMA``)."""

from __future__ import annotations

import pyarrow as pa

from udfs.questions import QUESTIONS_SCHEMA
from udfs.schemas import UTC_TS

QUERY_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("query_type", pa.string(), nullable=False),
        pa.field("query", pa.string(), nullable=False),
        pa.field("n_hits", pa.int32()),
    ]
)
CANDIDATE_SCHEMA = pa.schema(  # the rows the relevance stage rates
    [("question_id", pa.string()), ("article_id", pa.string()), ("published_at", UTC_TS)]
)
EVIDENCE_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("published_at", UTC_TS, nullable=False),
        pa.field("title", pa.string()),
        pa.field("url", pa.string()),
        pa.field("rating", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("query_types", pa.list_(pa.string())),
        pa.field("n_queries", pa.int32()),
        pa.field("best_score", pa.float64()),
    ]
)
CIL_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("window_ids", pa.list_(pa.string())),
        pa.field("k", pa.int32()),
        pa.field("k_raw", pa.int32()),
        pa.field("truncated", pa.bool_()),
        pa.field("p_do1", pa.float64()),  # P(Y=Ŷ | do(X_i=1))
        pa.field("p_do0", pa.float64()),  # P(Y=Ŷ | do(X_i=0))
        pa.field("cil", pa.float64()),
        pa.field("joint_uniform_fallback", pa.bool_()),  # Σq = 0: uniform π used (§8)
        pa.field("status", pa.string()),  # ok | failed
        pa.field("reason", pa.string()),
        pa.field("estimator", pa.string()),
        pa.field("repeats", pa.int32()),
        pa.field("layout", pa.string()),
        pa.field("model", pa.string()),
    ]
)
JOINT_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        pa.field("bits", pa.string(), nullable=False),  # character j = status of window article j
        pa.field("window_ids", pa.list_(pa.string())),
        pa.field("q_raw", pa.float64()),
        pa.field("pi", pa.float64()),
        pa.field("uniform_fallback", pa.bool_()),
    ]
)
QUESTION_OUT_SCHEMA = pa.schema(
    [
        *QUESTIONS_SCHEMA,
        pa.field("split", pa.string(), nullable=False),  # L1 | L2 | none
        pa.field("reason", pa.string()),
        pa.field("n_queries", pa.int32()),
        pa.field("queries_fallback", pa.bool_()),
        pa.field("n_candidates", pa.int32()),
        pa.field("n_evidence", pa.int32()),
        pa.field("n_cil_ok", pa.int32()),
        pa.field("n_above_tau", pa.int32()),
        pa.field("n_corpus_on_or_after_D", pa.int32()),  # articles the cutoff kept out of the search
        pa.field("llm_requests", pa.int32()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
    ]
)
