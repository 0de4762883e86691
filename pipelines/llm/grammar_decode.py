"""Greedy decoding on the local engine: the xgrammar mask of each row, and an LM head that
computes the float32 logits of a few candidate tokens only, with the choice the full head makes.

Why the head: at the embedded model's 262,144-token vocabulary the LM head is a 671 MB float32
matrix read at every decoding step, about a third of a step on one core. The candidates of a step
are the tokens the grammar allows when every row allows few (a heading, a label, a point 0, 1 or
2); otherwise, on a CPU with bfloat16 products, the tokens a bfloat16 copy of the head (half the
bytes, 45 ms against 117 for a batch of 4) cannot rule out (``Screen``): on the embedded model,
1 to 43 tokens a row.

Why the choice is the same: a float32 dot product of length K computed in any order is within
``γ_K Σ|h_k w_k|`` of the exact value (γ_K = K·u / (1 − K·u), u = 2⁻²⁴). The full head and the small
product may round differently, but when a row's best candidate leads every other candidate by more
than twice the sum of their two bounds, both computations rank it first. The screen bounds each
token's full-head logit from above and below (bfloat16 rounding of both factors and of the result,
u = 2⁻⁸, float32 accumulation, and Σ|h_k w_k| ≤ ‖h‖·‖w‖); a token whose upper bound is below some
token's lower bound cannot be the full head's choice. A step where some row's lead is smaller (a
near tie) or some row keeps many candidates computes the full head.

The full head itself (``FewRowsHead``, every batch, sampled too): for 2 to 8 rows the engine
multiplies the weight by the hidden states' transpose instead of the hidden states by the
weight's transpose, the same float32 product in another order. MKL's kernel for the usual order
is slow for a few rows: on one AVX2 core 126 ms against 57 for 4 rows, 105 against 55 for 2
(1 row and 12 or more: the same time, or the usual order faster). The batch size alone picks the
order, so a run's numbers never depend on timing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

LIMIT = 1024  # at most this many candidate tokens per row for the small product
ROUNDING = 2.0**-24
BF16 = 2.0**-8  # bfloat16's unit roundoff
SAFETY = 2.0  # times the bound: the bounds and the leads are themselves computed in float32
FEW_ROWS = range(2, 9)  # batch sizes whose full head is computed as weight @ hiddenᵀ
# generation options whose logits processors read or reorder logit values: with any of them set,
# every step computes the full head
VALUE_OPTIONS = (
    "repetition_penalty",
    "encoder_repetition_penalty",
    "no_repeat_ngram_size",
    "sequence_bias",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "min_length",
    "min_new_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "exponential_decay_length_penalty",
)


class GrammarMask:
    """Each row follows its own xgrammar matcher. ``advance`` runs before every forward pass of the
    model (a forward pre-hook): it feeds each row's matcher the token the row chose at the
    previous step, then fills the bitmask of the step's token, so the mask is known before the LM
    head runs. The logits processor (``__call__``) masks the tokens the grammar forbids; a row whose
    grammar is complete may only end.

    In a greedy batch (``greedy``) a row whose last mask allowed more than ``LIMIT`` tokens (free
    text inside a string) skips the fill: ``__call__`` offers its matcher the row's best token
    first and fills the mask only when the grammar refuses it. Greedy decoding picks the best
    allowed token, so when the best token is allowed the choice is the one the full mask gives;
    filling a free-text state's mask costs up to ~0.1 s a row and step on the embedded model's
    vocabulary, a check one token. ``checked`` counts the row-steps answered so."""

    def __init__(self, compiled: Any, rows: int, end_ids: list[int], greedy: bool = False):
        import xgrammar as xgr

        self.matchers = [xgr.GrammarMatcher(compiled) for _ in range(rows)]
        self.vocab = compiled.tokenizer_info.vocab_size
        self.bitmask = xgr.allocate_token_bitmask(rows, self.vocab)
        self.end_ids, self.greedy = end_ids, greedy
        self.lazy = [False] * rows  # the row's mask is not filled this step: __call__ checks first
        self.chosen: list[int | None] = [None] * rows  # the token a lazy row's matcher took
        self.steps = self.checked = 0

    def advance(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self.steps:  # the first pass reads the prompt; every later one, each row's last choice
            for i, token in enumerate(kwargs["input_ids"][:, -1].tolist()):
                matcher, chosen, self.chosen[i] = self.matchers[i], self.chosen[i], None
                if chosen == token:
                    continue  # taken in __call__
                if chosen is not None:  # a row stopped by a stop string is fed padding instead
                    matcher.rollback(1)
                if not matcher.is_terminated():
                    matcher.accept_token(int(token))
        self.steps += 1
        for i, matcher in enumerate(self.matchers):
            if matcher.is_terminated():
                self.lazy[i] = False
                self._only(i, self.end_ids)
            elif not self.lazy[i]:
                self._fill(i)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import xgrammar as xgr

        for i in (i for i, lazy in enumerate(self.lazy) if lazy):
            best = int(scores[i].argmax())
            if self.matchers[i].accept_token(best):
                self.chosen[i] = best
                self.checked += 1
                self._only(i, [best])
            else:
                self._fill(i)
        xgr.apply_token_bitmask_inplace(scores, self.bitmask, vocab_size=scores.shape[-1])
        return scores

    def _fill(self, i: int) -> None:
        self.matchers[i].fill_next_token_bitmask(self.bitmask, i)
        if self.greedy:
            self.lazy[i] = int(_bits(self.bitmask[i], self.vocab).sum()) > LIMIT

    def _only(self, i: int, tokens: list[int]) -> None:
        self.bitmask[i].fill_(0)
        for t in tokens:
            self.bitmask[i, t // 32] |= 1 << (t % 32)

    def filled(self) -> bool:
        """True when every row's mask of this step is filled (no row checks its best token first)."""
        return not any(self.lazy)

    def allowed(self, vocab: int) -> list[np.ndarray]:
        """Each row's allowed token ids at this step (bit t % 32 of word t // 32 is token t)."""
        return [np.flatnonzero(row) for row in _bits(self.bitmask, vocab)]


def _bits(words: torch.Tensor, vocab: int) -> np.ndarray:
    """The bits of bitmask ``words`` (one row or a batch) for the first ``vocab`` tokens: bit
    t % 32 of word t // 32 is token t; xgrammar may set the last word's spare bits."""
    bits = np.unpackbits(words.numpy().view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :vocab]


def plain_greedy(generation_config: Any) -> bool:
    """True when no logits processor of the model's generation config changes logit values."""
    from transformers import GenerationConfig

    defaults = GenerationConfig()
    return all(getattr(generation_config, k, None) == getattr(defaults, k, None) for k in VALUE_OPTIONS)


def gamma(k: int) -> float:
    """γ_k of float32: the relative bound of a dot product of length ``k``."""
    return k * ROUNDING / (1 - k * ROUNDING)


class Screen:
    """A bfloat16 copy of an LM head's weight and its rows' norms, made once per engine: its
    product with a hidden state bounds every token's float32 logit (module docstring)."""

    def __init__(self, weight: torch.Tensor):
        self.weight, self.norms = weight.bfloat16(), weight.norm(dim=1)
        g = gamma(weight.shape[1])
        self.relative = 2 * BF16 + BF16**2 + g * (1 + BF16) ** 2  # both factors rounded, then summed
        self.full = g  # the full head's own rounding

    @staticmethod
    def available() -> bool:
        """True when this CPU multiplies bfloat16 natively; elsewhere the copy would not be faster."""
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())

    def candidates(self, h: torch.Tensor, allowed: list[np.ndarray] | None) -> list[np.ndarray]:
        """Each row's tokens (of ``allowed``, when given) that the full head could choose."""
        z = torch.nn.functional.linear(h.bfloat16(), self.weight).float()
        size = h.norm(dim=1, keepdim=True) * self.norms  # ≥ Σ|h_k w_k| (Cauchy–Schwarz)
        error = SAFETY * (self.relative * size + BF16 * z.abs()) + self.full * size
        low, high = z - error, z + error
        if allowed is not None:
            out = torch.ones_like(z, dtype=torch.bool)
            for i, tokens in enumerate(allowed):
                out[i, torch.from_numpy(tokens)] = False
            low[out], high[out] = -torch.inf, -torch.inf
        floor = low.max(dim=1, keepdim=True).values
        return [torch.nonzero(row).flatten().numpy() for row in high >= floor]


class FewRowsHead(torch.nn.Module):
    """A bias-free LM head (the model's own weight, shared) that computes the logits of a batch of
    ``FEW_ROWS`` rows as ``weight @ hiddenᵀ`` (module docstring), any other as ``nn.Linear`` does."""

    def __init__(self, head: torch.nn.Linear):
        super().__init__()
        if head.bias is not None:
            raise ValueError("FewRowsHead takes a bias-free LM head")
        self.weight, self.bias = head.weight, None

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        rows = hidden.reshape(-1, hidden.shape[-1])
        if rows.shape[0] not in FEW_ROWS:
            return torch.nn.functional.linear(hidden, self.weight)
        # contiguous: logits processors (xgrammar's mask among them) write into the logits in place
        logits = torch.mm(self.weight, rows.T).T.contiguous()
        return logits.reshape(*hidden.shape[:-1], self.weight.shape[0])


class AllowedHead(torch.nn.Module):
    """The LM head of a greedy batch (module docstring): ``head`` is the engine's full head (bias-free),
    ``mask`` the batch's grammar (None for free text), ``screen`` the engine's bfloat16 copy (None
    without one). ``small_steps`` counts the steps the small product answered."""

    def __init__(self, head: torch.nn.Linear, mask: GrammarMask | None, screen: Screen | None = None):
        super().__init__()
        self.head, self.mask, self.screen, self.small_steps = head, mask, screen, 0
        self.gamma = gamma(head.weight.shape[1])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self._small(hidden) if hidden.shape[1] == 1 else None
        return self.head(hidden) if logits is None else logits

    def _candidates(self, h: torch.Tensor) -> list[np.ndarray] | None:
        """Each row's candidate tokens: the allowed ones when every row allows few, else those the
        screen keeps; None when some row keeps more than LIMIT."""
        if self.mask is not None and not self.mask.filled():
            return None  # a row checks its best token before its mask: every logit is needed
        allowed = self.mask.allowed(self.head.weight.shape[0]) if self.mask is not None else None
        if allowed is not None and max(len(s) for s in allowed) <= LIMIT:
            return allowed
        if self.screen is None:
            return None
        sets = self.screen.candidates(h, allowed)
        return sets if max(len(s) for s in sets) <= LIMIT else None

    def _small(self, hidden: torch.Tensor) -> torch.Tensor | None:
        vocab = self.head.weight.shape[0]
        h = hidden[:, 0, :]
        sets = self._candidates(h)
        if sets is None:
            return None
        union = np.unique(np.concatenate(sets))
        weight = self.head.weight[torch.from_numpy(union)]
        values, bounds = h @ weight.T, self.gamma * (h.abs() @ weight.abs().T)
        logits = torch.full((h.shape[0], 1, vocab), -torch.inf, dtype=values.dtype)
        for i, tokens in enumerate(sets):
            if not len(tokens):
                continue  # all -inf, as the mask leaves such a row
            cols = torch.from_numpy(np.searchsorted(union, tokens))
            v, e = values[i, cols], bounds[i, cols]
            best = int(torch.argmax(v))
            lead = v[best] - v - 2 * SAFETY * (e[best] + e)
            lead[best] = torch.inf
            if not bool((lead > 0).all()):
                return None  # a near tie: the full head decides it, as it would have
            logits[i, 0, torch.from_numpy(tokens)] = v
        self.small_steps += 1
        return logits
