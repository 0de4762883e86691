"""The prefix-cache model behind ``bench.cil_cost`` against a direct block-hash simulation of an
ideal vLLM-style cache (full 16-token blocks hashed as a chain, nothing evicted, the last prompt
token always computed)."""

import random
import zlib

from udfs.prophet.prefix_cache import PrefixCache, segments


def char_tokens(text: str) -> list[int]:
    return [ord(c) for c in text]


def word_tokens(text: str) -> list[int]:
    """A tokenizer whose tokens never span a newline run, like the embedded model's on our prompts."""
    return [zlib.crc32(w.encode()) % 1000 for w in text.replace("\n", " \n ").split(" ") if w]


def block_hash_reference(texts: list[str], tokenize, block: int) -> list[int]:
    """Computed tokens per request, by hashing every full block with its whole prefix."""
    cached: set[tuple] = set()
    out = []
    for text in texts:
        ids = [t for seg in segments(text) for t in tokenize(seg)]
        chain = [tuple(ids[: (k + 1) * block]) for k in range(len(ids) // block)]
        reused = 0
        for key in chain:
            if key not in cached:
                break
            reused += 1
        cached.update(chain)
        out.append(len(ids) - min(reused, (len(ids) - 1) // block) * block)
    return out


def test_reuse_is_block_aligned_and_the_last_token_is_always_computed():
    cache = PrefixCache(char_tokens, block=4)
    assert cache.add("abcdefghij") == (10, 10)  # cold
    assert cache.add("abcdefghXY") == (10, 2)  # 8 shared characters: two blocks reused
    assert cache.add("abcdefXYZ") == (9, 5)  # 6 shared: one block
    assert cache.add("abcdefgh") == (8, 4)  # all shared, but the last block is recomputed
    assert cache.add("abcdefghi") == (9, 1)


def test_matches_the_block_hash_reference_on_random_prompt_families():
    rng = random.Random(3)
    lines = [f"line {i} " + "word " * rng.randint(0, 9) + "\n" for i in range(12)]
    for block, tokenize in ((4, char_tokens), (16, char_tokens), (4, word_tokens)):
        texts = []
        for _ in range(300):
            picked = [rng.choice(lines[:3]), *rng.sample(lines, rng.randint(0, 6))]
            texts.append(
                "".join(picked) + ("\n" if rng.random() < 0.3 else "") + rng.choice(["yes", "no", ""])
            )
        texts += texts[:20]  # repeated prompts
        cache = PrefixCache(tokenize, block=block)
        assert [cache.add(t)[1] for t in texts] == block_hash_reference(texts, tokenize, block)


def test_segments_join_back():
    text = "a\n\nb c\nd"
    assert segments(text) == ["a\n\n", "b c\n", "d"] and "".join(segments(text)) == text
    assert segments("") == [] and segments("x\n") == ["x\n"]
