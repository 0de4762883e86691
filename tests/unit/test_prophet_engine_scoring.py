"""Regression test for the local engine's scoring pass (``pipelines.llm.local_engine``), found
while sizing PROPHET's logprob stages: it must ask the model for the last position's logits
only. The embedded model's LM head spans a 262k-token vocabulary, so computing logits at every
prompt position doubled the cost of each Yes/No term."""

from types import SimpleNamespace

import torch

from pipelines.llm.local_engine import LocalEngine

VOCAB = 7


class _Tokenizer:
    """Three tokens a prompt: too short an opening to share (``shared_prefix``)."""

    pad_token_id = 0

    def __call__(self, text, **kwargs):
        return {"input_ids": [1, 2, 3]}


class _Model:
    """Logits whose last position depends on the row, at every position unless asked otherwise."""

    def __init__(self):
        self.kwargs = []

    def __call__(self, input_ids, attention_mask, **kwargs):
        self.kwargs.append(kwargs)
        rows, length = input_ids.shape
        keep = kwargs.get("logits_to_keep") or length
        logits = torch.arange(rows * VOCAB, dtype=torch.float32).reshape(rows, 1, VOCAB).repeat(1, keep, 1)
        return SimpleNamespace(logits=logits)


def test_scoring_computes_the_last_position_only():
    engine = LocalEngine.__new__(LocalEngine)
    engine.tokenizer, engine.model = _Tokenizer(), _Model()
    logprobs, lengths = engine._next_token_logprobs(["a", "b"])
    assert engine.model.kwargs == [{"logits_to_keep": 1}]
    assert logprobs.shape == (2, VOCAB) and lengths == [3, 3]
    expected = torch.log_softmax(torch.arange(2 * VOCAB, dtype=torch.float32).reshape(2, VOCAB), dim=-1)
    assert torch.allclose(logprobs, expected)
