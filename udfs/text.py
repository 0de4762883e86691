"""Cutting text for prompts: one unit (whitespace-separated words) and one helper everywhere."""

from __future__ import annotations


def first_words(text: str | None, n: int | None) -> str:
    """``text`` cut after its first ``n`` words; unchanged (layout kept) when ``n`` is None or
    the text is short enough, whitespace collapsed when it is cut."""
    text = text or ""
    if n is None:
        return text
    words = text.split()
    return text if len(words) <= n else " ".join(words[:n])
