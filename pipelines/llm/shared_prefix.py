"""A batch whose prompts open with the same tokens computes that opening once.

A stage's prompts open with their template's instructions, and sometimes with more:
TCELongBench's key points follow some 730 tokens of rules and examples, Daily Oracle's summaries
some 780, OpenForecast asks about each event of one article, and a choice asks the same prompt
once per prefix of its options. On a CPU the prefill of those shared tokens is most of a batch's
time. ``inputs`` computes them once, each row's own remainder on top of them, and assembles the
left-padded key/value cache the model's prefill of the padded batch would have made;
``generate`` (or one forward pass, for scores) continues from it with each row's last token.
Left padding only ever precedes a row's tokens, so a row's keys and values, sliding-window
layers included, do not depend on its batch-mates: the answers are those of the plain batch, up
to float rounding.
"""

from __future__ import annotations

import copy
from typing import Any

# Shared tokens below which a batch is prefilled as usual: fewer save less than a forward costs.
MIN_SHARED = 64


def shared_length(rows: list[list[int]]) -> int:
    """The tokens every row opens with, leaving each row at least its last token of its own."""
    if len(rows) < 2:
        return 0
    shortest = min(len(r) for r in rows) - 1
    first = rows[0]
    n = 0
    while n < shortest and all(r[n] == first[n] for r in rows):
        n += 1
    return n


def inputs(model: Any, rows: list[list[int]], pad_id: int) -> dict[str, Any]:
    """The model's inputs for the token ids ``rows``: left-padded ``input_ids`` and
    ``attention_mask`` and, when the rows share an opening of ``MIN_SHARED`` tokens or more,
    ``past_key_values``: the cache of all but each row's last token, the opening computed once."""
    import torch

    longest = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for k, ids in enumerate(rows):
        input_ids[k, longest - len(ids) :] = torch.tensor(ids)
        attention_mask[k, longest - len(ids) :] = 1
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    cache = _prefilled(model, rows)
    if cache is not None:
        batch["past_key_values"] = cache
    return batch


def _prefilled(model: Any, rows: list[list[int]]) -> Any:
    """The batch cache of ``rows`` (``_left_padded``), or None when too few tokens are shared or
    the model's cache has layers other than full and sliding-window attention."""
    import torch
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    shared = shared_length(rows)
    if shared < MIN_SHARED:
        return None
    config = model.config
    kinds = (DynamicLayer, DynamicSlidingWindowLayer)
    if any(type(layer) not in kinds for layer in DynamicCache(config=config).layers):
        return None
    decoder = model.get_decoder()  # the layers without the LM head: no logits are needed here
    with torch.no_grad():
        opening = DynamicCache(config=config)
        decoder(input_ids=torch.tensor([rows[0][:shared]]), past_key_values=opening, use_cache=True)
        caches = []
        for k, ids in enumerate(rows):  # the last row may extend the opening's own cache
            cache = opening if k == len(rows) - 1 else copy.deepcopy(opening)
            if len(ids) - 1 > shared:
                decoder(input_ids=torch.tensor([ids[shared:-1]]), past_key_values=cache, use_cache=True)
            caches.append(cache)
    return _left_padded(caches, [len(r) for r in rows], config)


def _left_padded(caches: list[Any], lengths: list[int], config: Any) -> Any:
    """One batch cache from single-row caches of ``length - 1`` positions each: every layer
    holds the positions the padded batch's own prefill would keep (a sliding-window layer, the
    last ``window - 1``), each row's right-aligned after zeros its attention mask hides."""
    import torch
    from torch.nn import functional

    cached = max(lengths) - 1
    batch = type(caches[0])(config=config)
    for i, layer in enumerate(batch.layers):
        window = getattr(layer, "sliding_window", None)
        keep = cached if window is None else min(cached, window - 1)
        keys, values = [], []
        for cache, length in zip(caches, lengths, strict=True):
            own = min(keep, length - 1)
            source = cache.layers[i]
            keys.append(functional.pad(source.keys[:, :, -own:, :], (0, 0, keep - own, 0)))
            values.append(functional.pad(source.values[:, :, -own:, :], (0, 0, keep - own, 0)))
        layer.update(torch.cat(keys), torch.cat(values))
        if window is not None:
            layer.cumulative_length = cached  # positions seen, not kept: the masks' offsets use it
    return batch
