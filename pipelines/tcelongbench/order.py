"""S7 — order questions: the entities of the kept key points of days 1..n-1, every window of
three consecutive dates of one entity, and the voted Storytelling/Temporal check. No window may
reach the last day (asserted)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pipelines.builders import Build
from pipelines.tcelongbench.config import Config
from pipelines.tcelongbench.questions import parsed, tally
from pipelines.tcelongbench.stages import llm_stages
from pipelines.tcelongbench.state import State
from udfs.ids import stable_id
from udfs.tcelongbench import order, verify
from udfs.tcelongbench.tables import ORDER


def build_problems(b: Build[Config], s: State) -> None:
    """Entities of the kept points of days 1..n-1 (only TCEs with ≥ 3 such days), then every
    order window (``s.problems``)."""
    points, events = s.kept, s.events
    n_of = {t["tce_id"]: t["n"] for t in events.tces}
    eligible = [
        {"kp_id": p["kp_id"], "tce_id": p["tce_id"], "point": p["text"]}
        for p in points
        if n_of[p["tce_id"]] - 1 >= order.WINDOW and p["k"] < n_of[p["tce_id"]]
    ]
    stage = llm_stages(b.config)["entities"]
    out = b.ledger.run(stage, eligible, unit="key_point", id_column="kp_id", parent_column="tce_id")
    entities = {r["kp_id"]: r["entities"] for r in parsed(out)}
    by_tce: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        if p["kp_id"] in entities:
            by_tce[p["tce_id"]].append({**p, "entities": entities[p["kp_id"]]})
    problems = []
    for tce_id in sorted(by_tce):
        last_allowed = events.by_id[tce_id]["dates"][-2]
        for w in order.order_windows(by_tce[tce_id]):
            if max(w["dates"]) > last_allowed:
                raise AssertionError(f"order window of {tce_id} reaches the last day")
            qa_id = stable_id("qa", ORDER, tce_id, w["entity"], *w["kp_ids"])
            problems.append({"qa_id": qa_id, "tce_id": tce_id, **w})
    s.problems = problems


def vote_orders(b: Build[Config], s: State) -> None:
    """The Storytelling + Temporal check on each problem's points in gold order, majority rule
    (``s.order_questions``)."""
    rows = [{"qa_id": p["qa_id"], "tce_id": p["tce_id"], "points": p["points"]} for p in s.problems]
    stage = llm_stages(b.config)["order_votes"]
    out = b.ledger.run(stage, rows, unit="question", id_column="qa_id", parent_column="tce_id")
    s.order_questions = tally(b.config, b.ledger, "order_votes_tally", verify.STORY_TEMPORAL, s.problems, out)
