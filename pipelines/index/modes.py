"""The search modes of the article index: their names, and what the engine does with each.

``bm25``, ``dense``, ``hybrid``, ``bm25_title`` and ``tfidf`` (``engine`` says how each is
queried). ``tfidf`` and strict BM25 are rescored over a pool of the engine's full-text hits
(``pool_size``); every mode's score is higher-is-better (``score``).
"""

from __future__ import annotations

MODES = ("bm25", "dense", "hybrid", "bm25_title", "tfidf")
TITLE_BOOST = 1.25  # ForecastQA App. E.2: fields ["title^1.25", "body"]


def pool_size(k: int) -> int:
    """How many engine-ranked articles a strict or tfidf search rescores."""
    return max(200, 20 * k)


def rescored(mode: str, strict: bool) -> bool:
    """Whether a search's scores are computed over a pool (tfidf; strict but dense)."""
    return mode == "tfidf" or (strict and mode != "dense")


def check_mode(mode: str, strict: bool) -> None:
    """A mode and strictness the engine can search with, or ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if strict and mode == "bm25_title":
        raise ValueError("strict statistics are kept for the text field, so bm25_title has no strict form")


def score(row: dict) -> float:
    """Higher is better in every mode (a cosine distance becomes a similarity)."""
    if "_rescored" in row:
        return row["_rescored"]
    if "_distance" in row:
        return 1.0 - row["_distance"]
    return row["_score"]
