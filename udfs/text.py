"""Cutting text for prompts: one unit (words) and one helper everywhere.

A word is a whitespace-separated token, except in scripts written without spaces (Chinese,
Japanese kana, Korean syllables): there each character counts as a word, so a word limit bounds
the prompt's length in those languages too.
"""

from __future__ import annotations

import re

_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")


def first_words(text: str | None, n: int | None) -> str:
    """``text`` cut after its first ``n`` words; unchanged (layout kept) when ``n`` is None or
    the text is short enough, whitespace collapsed when it is cut (characters of an unspaced
    script stay joined as they were)."""
    text = text or ""
    if n is None:
        return text
    words = list(_WORD.finditer(text))
    if len(words) <= n:
        return text
    parts: list[str] = []
    for previous, word in zip([None, *words[: n - 1]], words[:n], strict=True):
        joined = previous is not None and previous.end() == word.start()
        parts.append(word.group() if joined or not parts else " " + word.group())
    return "".join(parts)


def headline(title: str | None, text: str | None, words: int) -> str:
    """An article's title and lead (its first ``words`` words) as one text: what the article index
    searches and embeds, and so what TCE formation clusters on."""
    lead = first_words(text, words)
    title = (title or "").strip()
    return f"{title}. {lead}" if title else lead
