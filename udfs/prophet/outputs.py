"""The answer forms of PROPHET's generated prompts, as regexes an engine enforces.

Each form is exactly what the stage's parser accepts, bounded so that an answer finishes inside
the stage's token budget (a constrained answer cut by ``max_tokens`` still fails):

- query lists (a)–(c): the rest of the JSON list the answer prefix opens (``Output: ["``), one
  to ``items`` strings of at most ``words`` words, then ``]``. Words are letter words (letters and
  ``' . &``; no hyphen chains, which cost a token a piece) or numbers of up to four digits, so JSON
  needs no escapes; an item never starts with a word of the prompt's format
  example ("entity", "event", "query", "step"), so a copied placeholder ("event 1") cannot occur;
- relevance (d): one line of thoughts, then ``Rating: <1-6>`` on a line of its own;
- verbalized CIL terms (e)/(f): reasoning without asterisks, then the paper's ``*0.xx*``.

Budgets are in tokens. Free text is bounded in characters, ``CHARS_PER_TOKEN`` a token (English
averages about 4), and word lists at ``TOKENS_PER_WORD``, so an answer ends inside its budget.
"""

from __future__ import annotations

import math
import string

CHARS_PER_TOKEN = 2
TOKENS_PER_WORD = 2
ENTITY_ITEMS, ENTITY_WORDS = 8, 5  # prompt (a) asks for no count; "at most 5 words" each
PLACEHOLDER_WORDS = ("entity", "event", "query", "step")
WORD_CHARS = 12  # the longest letter word
_EXTRA = "'.&"  # what a letter word may hold after its first letter, besides letters
_NUMBER = r"[0-9]{1,4}"  # a digit costs a token
_PROBABILITY = r"\*(0(\.[0-9]{1,2})?|1(\.0{1,2})?)\*"


def _class(excluded: str = "", extras: bool = True) -> str:
    """A character class: ASCII letters but ``excluded`` (either case), the Latin letters of
    À–ɏ (not × and ÷, which sit in that range), and with ``extras`` the characters of ``_EXTRA``."""
    keep = [c for c in string.ascii_letters if c.lower() not in excluded]
    runs: list[str] = []
    for c in keep:
        if runs and ord(c) == ord(runs[-1][-1]) + 1:
            runs[-1] = runs[-1][0] + c
        else:
            runs.append(c)
    body = "".join(r if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"[{body}À-ÖØ-öø-ɏ{_EXTRA if extras else ''}]"


def word_except(words: tuple[str, ...], prefix: str = "") -> str:
    """A letter word of at most ``WORD_CHARS`` characters that is none of ``words`` (lower case;
    compared case-insensitively): a walk down the words' trie that leaves it, or stops at a node
    that is no word's end."""
    depth = len(prefix)
    children = sorted({w[depth] for w in words if w.startswith(prefix) and len(w) > depth})
    rest = WORD_CHARS - depth - 1
    parts = [_class("".join(children), extras=depth > 0) + (f"{_class()}{{0,{rest}}}" if rest > 0 else "")]
    if rest > 0:
        parts += [f"[{c}{c.upper()}]" + word_except(words, prefix + c) for c in children]
    body = "(" + "|".join(parts) + ")"
    return body + "?" if depth and prefix not in words else body


def _word() -> str:
    return f"({_class(extras=False)}{_class()}{{0,{WORD_CHARS - 1}}}|{_NUMBER})"


def query_shape(max_items: int, max_words: int, tokens: int) -> tuple[int, int]:
    """(items, words per item) of a query list that fits ``tokens``: as many items as asked while
    each can hold two words (or ``max_words`` if fewer), then as many words as fit."""
    items = max_items
    while True:
        words = min(max_words, math.floor((tokens - 1 - 2 * items) / (TOKENS_PER_WORD * items)))
        if words >= min(2, max_words) or items == 1:
            return items, max(1, words)
        items -= 1


def query_regex(max_items: int, max_words: int, tokens: int) -> str:
    """The rest of a JSON list of 1..items query strings after the opening ``["``, closed by ``]``."""
    items, words = query_shape(max_items, max_words, tokens)
    first = f"({word_except(PLACEHOLDER_WORDS)}|{_NUMBER})"
    item = first + (f"( {_word()}){{0,{words - 1}}}" if words > 1 else "")
    more = f'(, "{item}"){{0,{items - 1}}}' if items > 1 else ""
    return f'{item}"{more}\\]'


def rating_regex(tokens: int) -> str:
    """Thoughts on one line (after the ``Thoughts:`` prefix), then ``Rating: <1-6>``."""
    chars = max(0, CHARS_PER_TOKEN * (tokens - 6))
    return f"[^\\n]{{0,{chars}}}\\nRating: [1-6]"


def verbalized_regex(tokens: int) -> str:
    """Reasoning without asterisks, then a probability wrapped in asterisks (``*0.62*``)."""
    chars = max(0, CHARS_PER_TOKEN * (tokens - 8))
    return f"[^*]{{0,{chars}}}{_PROBABILITY}"
