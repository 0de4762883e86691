"""Probabilities over a fixed option set from next-token log-probabilities.

An option may span several tokens. The options' token sequences form a trie; only the trie
nodes where the options diverge need a model call, and each such call scores just the tokens of
that node's children (``max_tokens=1`` with ``logprob_token_ids`` on vLLM, one forward pass on
the local engine). All nodes are known before any call, so one pass scores them all. The
probability of an option is the product, along its path, of its child's share of the mass at
each branching node — the model's distribution restricted to the option set.

At the root, surface variants of each option (leading space, lower case, capitalised) add their
first tokens to the option's mass, so "Yes", " yes" and " Yes" all count for Yes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Tokenize = Callable[[str], list[int]]


@dataclass(frozen=True)
class ChoiceNode:
    """A branching point: the canonical tokens consumed before it and the tokens to score there."""

    prefix_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    token_group: tuple[int, ...]  # for each scored token, the index of the group it counts for
    groups: tuple[tuple[int, ...], ...]  # option indexes reachable through each group


@dataclass(frozen=True)
class ChoicePlan:
    """The nodes to score and, for every option, its (node, group) path."""

    options: tuple[str, ...]
    nodes: tuple[ChoiceNode, ...]
    paths: tuple[tuple[tuple[int, int], ...], ...]


def option_surface(option: str, prompt_ends_with_space: bool) -> str:
    """How an option appears right after the prompt: with a leading space unless one is there."""
    return option if prompt_ends_with_space else " " + option


def _variants(option: str) -> list[str]:
    forms = dict.fromkeys([option, option.lower(), option.capitalize(), option.upper()])
    return [space + form for form in forms for space in (" ", "")]


def plan_choice(options: Sequence[str], tokenize: Tokenize, prompt_ends_with_space: bool) -> ChoicePlan:
    """Build the scoring plan; raises ValueError when options are empty, repeated or token-prefixes
    of one another (then no next-token distribution can tell them apart: label them A/B/C)."""
    if not options or any(not o.strip() for o in options):
        raise ValueError("choice options must be non-empty strings")
    if len(set(options)) != len(options):
        raise ValueError(f"choice options repeat: {list(options)}")
    seqs = [tuple(tokenize(option_surface(o, prompt_ends_with_space))) for o in options]
    for i, a in enumerate(seqs):
        for j, b in enumerate(seqs):
            if i != j and len(a) <= len(b) and b[: len(a)] == a:
                raise ValueError(
                    f"option {options[i]!r} is a token prefix of {options[j]!r}; use labels instead"
                )

    nodes: list[ChoiceNode] = []
    paths: list[list[tuple[int, int]]] = [[] for _ in options]

    def expand(prefix: tuple[int, ...], members: list[int], depth: int) -> None:
        by_token: dict[int, list[int]] = defaultdict(list)
        for i in members:
            by_token[seqs[i][depth]].append(i)
        if len(by_token) == 1:
            token, group = next(iter(by_token.items()))
            expand((*prefix, token), group, depth + 1)
            return
        canonical = sorted(by_token)
        token_ids, token_group = list(canonical), list(range(len(canonical)))
        if depth == 0:
            owner = {t: g for g, t in enumerate(canonical)}
            taken = set(canonical)
            for g, t in enumerate(canonical):
                if len(by_token[t]) != 1:
                    continue
                for form in _variants(options[by_token[t][0]]):
                    ids = tokenize(form)
                    if ids and ids[0] not in taken and ids[0] not in owner:
                        owner[ids[0]] = g
                        taken.add(ids[0])
                        token_ids.append(ids[0])
                        token_group.append(g)
        index = len(nodes)
        nodes.append(
            ChoiceNode(
                prefix_ids=prefix,
                token_ids=tuple(token_ids),
                token_group=tuple(token_group),
                groups=tuple(tuple(by_token[t]) for t in canonical),
            )
        )
        for g, t in enumerate(canonical):
            for i in by_token[t]:
                paths[i].append((index, g))
            if len(by_token[t]) > 1:
                expand((*prefix, t), by_token[t], depth + 1)

    if len(options) > 1:
        expand((), list(range(len(options))), 0)
    return ChoicePlan(tuple(options), tuple(nodes), tuple(tuple(p) for p in paths))


def resolve_choice(plan: ChoicePlan, node_logprobs: Sequence[Sequence[float]]) -> tuple[list[float], float]:
    """Option probabilities (summing to 1) and the raw probability mass the model put on the
    first branching node's scored tokens (1.0 for a single option). ``node_logprobs[k]`` aligns with ``plan.nodes[k].token_ids``;
    a missing token is ``-inf``. When a node has no mass at all its groups share it equally."""
    if len(node_logprobs) != len(plan.nodes):
        raise ValueError(f"expected log-probabilities for {len(plan.nodes)} nodes, got {len(node_logprobs)}")
    shares: list[list[float]] = []
    for node, lps in zip(plan.nodes, node_logprobs, strict=True):
        if len(lps) != len(node.token_ids):
            raise ValueError("log-probabilities do not align with the node's tokens")
        mass = [0.0] * len(node.groups)
        for g, lp in zip(node.token_group, lps, strict=True):
            if lp is not None and not math.isnan(lp):
                mass[g] += math.exp(lp)
        total = sum(mass)
        shares.append([m / total for m in mass] if total > 0 else [1.0 / len(mass)] * len(mass))
    probs = [math.prod(shares[k][g] for k, g in path) for path in plan.paths]
    norm = sum(probs)
    probs = [p / norm for p in probs]
    if not plan.nodes:
        return probs, 1.0
    return probs, sum(math.exp(lp) for lp in node_logprobs[0] if lp is not None and not math.isnan(lp))
