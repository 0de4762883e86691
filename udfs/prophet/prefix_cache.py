"""A model of an engine's block prefix cache, to count the prompt tokens that must be computed.

vLLM hashes a prompt's full token blocks (16 tokens on GPU) as a chain, so block k of a request
is reused exactly when an earlier request shares its first 16·(k+1) tokens. With nothing evicted
(the ideal cache), a request of n tokens whose longest common token prefix with any earlier
request is L therefore computes ``n − 16·⌊min(L, n−1)/16⌋`` tokens (the last token is always
computed: the engine needs its logits).

``PrefixCache`` finds L with a trie over the prompts' newline-ended segments, each tokenized
once, and a token-level comparison inside the first segment that differs. It is exact whenever
tokenizing segment by segment gives the same tokens as tokenizing the whole prompt (no token
spans a newline run), which ``bench.cil_cost`` checks on a sample of its prompts.
"""

from __future__ import annotations

import re
from collections.abc import Callable

BLOCK_TOKENS = 16
_SEGMENT = re.compile(r"[^\n]*\n+|[^\n]+$")


def segments(text: str) -> list[str]:
    """The text cut after every run of newlines (the pieces join back to the text)."""
    return _SEGMENT.findall(text)


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """Ideal block prefix cache for the prompts of one question (see the module docstring)."""

    def __init__(self, tokenize: Callable[[str], list[int]], block: int = BLOCK_TOKENS):
        self.tokenize = tokenize
        self.block = block
        self._tokens: dict[str, list[int]] = {}
        self._root: dict[str, dict] = {}

    def tokens(self, segment: str) -> list[int]:
        if segment not in self._tokens:
            self._tokens[segment] = self.tokenize(segment)
        return self._tokens[segment]

    def add(self, text: str) -> tuple[int, int]:
        """(prompt tokens, tokens computed) of a request; the request is cached afterwards."""
        segs = segments(text)
        node, shared, depth = self._root, 0, 0
        while depth < len(segs) and segs[depth] in node:
            shared += len(self.tokens(segs[depth]))
            node = node[segs[depth]]
            depth += 1
        if depth < len(segs) and node:
            ids = self.tokens(segs[depth])
            shared += max(_common(ids, self.tokens(child)) for child in node)
        for seg in segs[depth:]:
            node = node.setdefault(seg, {})
        n = sum(len(self.tokens(s)) for s in segs)
        cached = min(shared, n - 1) // self.block * self.block if n else 0
        return n, n - cached
