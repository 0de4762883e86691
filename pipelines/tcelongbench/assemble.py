"""S9 — the end of a build: question dedup, the split by TCE, the benchmark tables and
evaluation items (``udfs.tcelongbench.assemble``), the rejected rows and the dataset card."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from pipelines.builders import Build, Outputs
from pipelines.llm.ledger import Ledger
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.questions import drop_question
from pipelines.tcelongbench.state import State
from udfs.embeddings import embed
from udfs.tcelongbench import finalize, order
from udfs.tcelongbench.assemble import assemble
from udfs.tcelongbench.tables import ORDER


def dedup_questions(
    config: Config, ledger: Ledger, mc_questions: list[dict[str, Any]], order_questions: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Within each TCE and task, in generation order: drop detail/forecast questions too similar
    to an earlier kept one and order problems sharing more than one key point with one."""
    step = ledger.step("qa_dedup")
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in mc_questions:
        groups[(q["tce_id"], q["task"])].append(q)
    kept = []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda q: (q["date"], q["j"], q["qa_id"]))
        vectors = embed([q["question"] for q in group], config.encoder)
        for q, dup in zip(group, finalize.dedup_questions(vectors, config.qa_dup_threshold), strict=True):
            if dup is None:
                ledger.keep(step)
                kept.append(q)
            else:
                drop_question(ledger, step, "duplicate_question", q, group[dup]["qa_id"])
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in order_questions:
        by_tce[p["tce_id"]].append(p)
    for tce_id in sorted(by_tce):
        group = by_tce[tce_id]  # already in generation order
        for p, dup in zip(group, order.dedup_order([p["kp_ids"] for p in group]), strict=True):
            if dup is None:
                ledger.keep(step)
                kept.append({**p, "task": ORDER})
            else:
                drop_question(ledger, step, "shares_key_points", p, group[dup]["qa_id"])
    ledger.close(step)
    return kept


def finish(b: Build[Config], s: State) -> Outputs:
    """S9: the question dedup, the split by TCE, the tables and evaluation items
    (``udfs.tcelongbench.assemble``) and the card's counts (``rejected``, one row per article
    formation left out, is streamed to disk: ``read_rejected``)."""
    config = b.config
    final = dedup_questions(config, b.ledger, s.mc_questions, s.order_questions)
    splits = finalize.assign_splits([t["tce_id"] for t in s.events.tces], config.split_ratios)
    tables, items = assemble(s.events.tces, s.events.rows, s.days, s.key_points, final, splits, config.seed)

    def counts(written: dict[str, pa.Table], rejected: int) -> dict[str, Any]:
        return {name: t.num_rows for name, t in written.items()} | {
            "rejected": rejected,
            "rejected_by_stage": {stage: sum(c.values()) for stage, c in b.ledger.rejected_counts().items()},
            "formation": s.events.report,
        }

    sources = {q["qa_id"]: f"{q['point']}\n{q['article']}" for q in final if q.get("article")}
    return Outputs(tables, items, counts, sources=sources)
