import math

import pytest

from udfs.choice import plan_choice, resolve_choice

VOCAB: dict[str, int] = {}


def word_tokenize(text: str) -> list[int]:
    """A toy tokenizer: one token per space-prefixed word (like SentencePiece's ▁word)."""
    pieces = []
    for i, word in enumerate(text.split(" ")):
        if word == "" and i == 0:
            continue
        piece = (" " if (i > 0 or text.startswith(" ")) else "") + word
        pieces.append(VOCAB.setdefault(piece, len(VOCAB)))
    return pieces


def lp(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


def test_single_token_options_one_node_and_probabilities_sum_to_one():
    plan = plan_choice(["Yes", "No"], word_tokenize, prompt_ends_with_space=False)
    assert len(plan.nodes) == 1 and plan.nodes[0].prefix_ids == ()
    node = plan.nodes[0]
    raw = {VOCAB[" Yes"]: 0.3, VOCAB[" No"]: 0.1}
    logprobs = [lp(raw.get(t, 0.0)) for t in node.token_ids]
    probs, mass = resolve_choice(plan, [logprobs])
    assert probs == pytest.approx([0.75, 0.25])
    assert mass == pytest.approx(0.4)


def test_variants_add_mass_to_their_option():
    plan = plan_choice(["Yes", "No"], word_tokenize, prompt_ends_with_space=False)
    node = plan.nodes[0]
    raw = {VOCAB[" Yes"]: 0.2, VOCAB[" yes"]: 0.2, VOCAB[" No"]: 0.1, VOCAB["No"]: 0.1}
    probs, mass = resolve_choice(plan, [[lp(raw.get(t, 0.0)) for t in node.token_ids]])
    assert probs == pytest.approx([2 / 3, 1 / 3])
    assert mass == pytest.approx(0.6)


def test_multi_token_options_sharing_a_first_token_use_a_second_node():
    options = ["New York", "New Delhi", "Paris"]
    plan = plan_choice(options, word_tokenize, prompt_ends_with_space=False)
    assert len(plan.nodes) == 2
    root, second = plan.nodes
    assert second.prefix_ids == (VOCAB[" New"],)
    root_raw = {VOCAB[" New"]: 0.6, VOCAB[" Paris"]: 0.2}
    second_raw = {VOCAB[" York"]: 0.3, VOCAB[" Delhi"]: 0.1}
    probs, _ = resolve_choice(
        plan,
        [
            [lp(root_raw.get(t, 0.0)) for t in root.token_ids],
            [lp(second_raw.get(t, 0.0)) for t in second.token_ids],
        ],
    )
    assert probs == pytest.approx([0.75 * 0.75, 0.75 * 0.25, 0.25])
    assert sum(probs) == pytest.approx(1.0)


def test_token_prefix_options_are_rejected():
    with pytest.raises(ValueError, match="token prefix"):
        plan_choice(["Sports", "Sports Competition"], word_tokenize, prompt_ends_with_space=False)
    with pytest.raises(ValueError, match="repeat"):
        plan_choice(["A", "A"], word_tokenize, prompt_ends_with_space=False)


def test_no_mass_at_all_falls_back_to_uniform():
    plan = plan_choice(["Yes", "No"], word_tokenize, prompt_ends_with_space=False)
    probs, mass = resolve_choice(plan, [[-math.inf] * len(plan.nodes[0].token_ids)])
    assert probs == pytest.approx([0.5, 0.5]) and mass == 0.0


def test_prompt_ending_in_space_scores_bare_tokens():
    plan = plan_choice(["Yes", "No"], word_tokenize, prompt_ends_with_space=True)
    assert VOCAB.setdefault("Yes", len(VOCAB)) in plan.nodes[0].token_ids[:2]
