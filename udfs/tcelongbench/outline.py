"""S2–S5 — outline: summary and key-point parsers, the key-point dedup and noise filter, and the
choice of each key point's gold article."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from udfs.llm_parsing import ParseError

MIN_SUMMARY_WORDS = 5
_BULLET = re.compile(r"^\s*[*\-•]\s*(.*)$")


def parse_summary(text: str) -> dict[str, str]:
    """A summary: the answer up to the first blank line, whitespace collapsed; fewer than
    ``MIN_SUMMARY_WORDS`` words is a parse error (an empty or cut-off answer)."""
    first = re.split(r"\n\s*\n", (text or "").strip(), maxsplit=1)[0]
    summary = " ".join(first.split())
    if len(summary.split()) < MIN_SUMMARY_WORDS:
        raise ParseError(f"summary shorter than {MIN_SUMMARY_WORDS} words")
    return {"summary": summary}


def parse_key_points(text: str) -> dict[str, list[str]]:
    """Key points: the lines that start with ``*``, ``-`` or ``•``, stripped; empty ones dropped.
    A ``Key Points:`` header is allowed. No bullet at all is a parse error."""
    points = []
    for line in (text or "").splitlines():
        m = _BULLET.match(line)
        if m:
            point = " ".join(m.group(1).split())
            if point:
                points.append(point)
    if not points:
        raise ParseError("no bulleted key point")
    return {"points": points}


def filter_key_points(
    vectors: np.ndarray, dup_threshold: float, noise_threshold: float
) -> list[dict[str, Any]]:
    """Dedup, then noise filter, over one TCE's key points given in ``(date, j)`` order.

    Dedup is greedy: a point whose cosine to an already kept earlier point is above
    ``dup_threshold`` is a ``dup`` of the most similar one. Then a kept point whose mean cosine to
    the other kept points is below ``noise_threshold`` is ``noise`` (decided on the post-dedup set
    at once). Returns per point: ``status`` (kept/dup/noise), ``dup_of`` (index or None),
    ``max_sim_earlier`` (to kept earlier points) and ``mean_sim_kept`` (to the other kept points;
    None when the point has no other kept point to compare with, or is a dup).
    """
    n = vectors.shape[0]
    sims = vectors @ vectors.T if n else np.zeros((0, 0))
    out: list[dict[str, Any]] = []
    kept: list[int] = []
    for i in range(n):
        best = max(kept, key=lambda k: sims[i, k]) if kept else None
        score = float(sims[i, best]) if best is not None else None
        if score is not None and score > dup_threshold:
            out.append({"status": "dup", "dup_of": best, "max_sim_earlier": score, "mean_sim_kept": None})
        else:
            kept.append(i)
            out.append({"status": "kept", "dup_of": None, "max_sim_earlier": score, "mean_sim_kept": None})
    if len(kept) >= 2:
        block = sims[np.ix_(kept, kept)]
        means = (block.sum(axis=1) - np.diag(block)) / (len(kept) - 1)
        for i, mean in zip(kept, means, strict=True):
            out[i]["mean_sim_kept"] = float(mean)
            if mean < noise_threshold:
                out[i]["status"] = "noise"
    return out


def choose_gold_articles(
    point_vectors: np.ndarray, article_vectors: np.ndarray, candidates: Sequence[Sequence[int]]
) -> list[tuple[int, float]]:
    """For each key point, the candidate article (index into ``article_vectors``: the articles of
    the point's date) with the highest cosine, and that cosine; ties go to the lower index."""
    chosen = []
    for i, cands in enumerate(candidates):
        if not cands:
            raise ValueError(f"key point {i} has no article on its date")
        scores = article_vectors[list(cands)] @ point_vectors[i]
        best = int(np.argmax(scores))
        chosen.append((int(cands[best]), float(scores[best])))
    return chosen
