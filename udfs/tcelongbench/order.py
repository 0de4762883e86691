"""S7 — TLB-order: entity parsing and normalisation, the order-window builder and the order
dedup."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from udfs.llm_parsing import ParseError

ENTITY_TYPES = ("PERSON", "NORP", "ORG", "GPE", "LOC", "FAC", "EVENT", "LAW")
WINDOW = 3
_LINE = re.compile(r"^\s*[-*•]?\s*([A-Za-z_]+)\s*:\s*(.+?)\s*$")


def normalize_entity(name: str) -> str:
    """Casefold, strip punctuation and a leading "the", collapse whitespace."""
    text = " ".join(re.sub(r"[^\w\s]", " ", name.casefold()).split())
    return re.sub(r"^the\s+", "", text)


def parse_entities(text: str) -> dict[str, list[str]]:
    """``TYPE: name`` lines → the distinct normalised names of the kept types (``ENTITY_TYPES``).
    Lines of other types (DATE, CARDINAL, …) and names without a letter are skipped; an answer
    with no ``TYPE: name`` line at all (and not ``NONE``) is a parse error."""
    lines = [m for m in (_LINE.match(line) for line in (text or "").splitlines()) if m]
    if not lines:
        if (text or "").strip().upper().startswith("NONE"):
            return {"entities": []}
        raise ParseError("no 'TYPE: name' line")
    names: list[str] = []
    for m in lines:
        if m.group(1).upper() not in ENTITY_TYPES:
            continue
        name = normalize_entity(m.group(2))
        if re.search(r"[^\W\d_]", name) and name not in names:
            names.append(name)
    return {"entities": names}


def order_windows(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order problems of one TCE from its key points (``kp_id, k, date, j, entities``; days
    ``1..n-1`` only). For every entity whose points cover ≥ 3 distinct dates: one point per date
    (lowest ``j``, then ``kp_id``), dates sorted, every window of 3 consecutive dates. Problems come
    in generation order: by the first point's ``(date, j)``, then entity."""
    by_entity: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
    for p in points:
        for entity in dict.fromkeys(p["entities"] or []):
            current = by_entity[entity].get(p["date"])
            if current is None or (p["j"], p["kp_id"]) < (current["j"], current["kp_id"]):
                by_entity[entity][p["date"]] = p
    problems = []
    for entity in sorted(by_entity):
        per_date = by_entity[entity]
        dates = sorted(per_date)
        for i in range(len(dates) - WINDOW + 1):
            chosen = [per_date[d] for d in dates[i : i + WINDOW]]
            problems.append(
                {
                    "entity": entity,
                    "kp_ids": [p["kp_id"] for p in chosen],
                    "dates": [p["date"] for p in chosen],
                    "ks": [p["k"] for p in chosen],
                    "points": [p["text"] for p in chosen],
                    "first_j": chosen[0]["j"],
                }
            )
    problems.sort(key=lambda q: (q["dates"][0], q["first_j"], q["entity"], q["kp_ids"]))
    return problems


def dedup_order(kp_id_sets: Sequence[Sequence[str]], max_shared: int = 1) -> list[int | None]:
    """For problems in generation order: None for a kept one, else the index of the earlier kept
    problem it shares more than ``max_shared`` key points with."""
    kept: list[int] = []
    out: list[int | None] = []
    for i, ids in enumerate(kp_id_sets):
        clash = next((k for k in kept if len(set(ids) & set(kp_id_sets[k])) > max_shared), None)
        out.append(clash)
        if clash is None:
            kept.append(i)
    return out
