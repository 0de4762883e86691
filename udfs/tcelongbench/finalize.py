"""S9 — QA dedup, seeded shuffles and the split by TCE."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from udfs.ids import stable_seed

LETTERS = "ABCD"
SPLITS = ("train", "dev", "test")


def dedup_questions(vectors: np.ndarray, threshold: float) -> list[int | None]:
    """For questions in generation order (their normalised vectors): None for a kept one, else the
    index of the most similar earlier kept question whose cosine is above ``threshold``."""
    kept: list[int] = []
    out: list[int | None] = []
    for i in range(vectors.shape[0]):
        best = max(kept, key=lambda k: float(vectors[i] @ vectors[k])) if kept else None
        if best is not None and float(vectors[i] @ vectors[best]) > threshold:
            out.append(best)
        else:
            out.append(None)
            kept.append(i)
    return out


def shuffle_choices(choices: Sequence[str], qa_id: str, seed: int) -> tuple[list[int], str]:
    """A seeded permutation of MC choices (the correct one first on input): ``perm[i]`` is the
    original index shown at position i, and the letter of the correct answer."""
    perm = list(range(len(choices)))
    random.Random(stable_seed(seed, "shuffle", qa_id)).shuffle(perm)
    return perm, LETTERS[perm.index(0)]


def shuffle_order(n: int, qa_id: str, seed: int) -> tuple[list[int], list[int], str]:
    """A seeded permutation of ``n`` chronologically sorted items: ``perm[i]`` is the chronological
    index shown at position i; ``gold_order`` lists the positions in chronological order (the
    eval-item form), and its letters joined by commas, e.g. ``A,C,B``."""
    perm = list(range(n))
    random.Random(stable_seed(seed, "shuffle", qa_id)).shuffle(perm)
    gold = [perm.index(c) for c in range(n)]
    return perm, gold, ",".join(LETTERS[g] for g in gold)


def assign_splits(tce_ids: Sequence[str], ratios: Sequence[float] = (0.7, 0.15, 0.15)) -> dict[str, str]:
    """Split TCEs deterministically: rank them by a hash of the id, then cut the ranking at the
    cumulative ratios (rounded), so the split sizes match the ratios as closely as the count allows
    and every question follows its TCE."""
    if len(ratios) != len(SPLITS) or abs(sum(ratios) - 1) > 1e-9:
        raise ValueError("split ratios must be three numbers summing to 1")
    ranked = sorted(set(tce_ids), key=lambda t: (stable_seed("split", t), t))
    n = len(ranked)
    first = round(ratios[0] * n)
    second = round((ratios[0] + ratios[1]) * n)
    return {
        t: SPLITS[0] if i < first else SPLITS[1] if i < second else SPLITS[2] for i, t in enumerate(ranked)
    }
