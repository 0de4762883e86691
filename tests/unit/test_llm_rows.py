import pytest

from udfs.llm_rows import merge_sampling, request_key, sample_seed


def test_merge_sampling_layers_and_rejects_typos():
    merged = merge_sampling({"temperature": 0.7, "max_tokens": 10}, {"max_tokens": 20})
    assert merged["temperature"] == 0.7 and merged["max_tokens"] == 20 and merged["top_p"] == 1.0
    with pytest.raises(ValueError, match="unknown sampling"):
        merge_sampling({"temprature": 0.1})
    with pytest.raises(ValueError, match="invalid"):
        merge_sampling({"top_p": 0})


def test_greedy_requests_ignore_the_seed_sampled_ones_do_not():
    greedy = merge_sampling()
    assert request_key("m", "generate", "p", {**greedy, "seed": 1}, []) == request_key(
        "m", "generate", "p", {**greedy, "seed": 2}, []
    )
    hot = merge_sampling({"temperature": 0.8})
    assert request_key("m", "generate", "p", {**hot, "seed": 1}, []) != request_key(
        "m", "generate", "p", {**hot, "seed": 2}, []
    )
    assert request_key("m", "generate", "p", greedy, []) != request_key("other", "generate", "p", greedy, [])


def test_sample_seeds_are_stable_and_distinct():
    assert sample_seed(0, "p", 0) == sample_seed(0, "p", 0)
    assert len({sample_seed(0, "p", i) for i in range(50)}) == 50
