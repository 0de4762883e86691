"""MinHash sketches of a text's word 3-gram set, for near-duplicate marking with LSH banding.

A text becomes its set of word 3-gram hashes (``shingles``), a MinHash signature of
``BANDS × ROWS`` values, and ``BANDS`` band keys. Two texts whose shingle sets have Jaccard
similarity J share at least one band key with probability ``1 - (1 - J**ROWS)**BANDS`` (0.9998
at J = 0.8, 0.64 at J = 0.5); candidates are then checked on their exact Jaccard similarity.
Every hash is a keyed blake2b or a fixed-seed universal hash, so sketches are the same on every
machine and every run (Python's ``hash`` is salted per process and is never used).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

SHINGLE_WORDS = 3
BANDS = 16
ROWS = 4
PRIME = 4_294_967_291  # largest prime below 2**32: (a * x + b) stays below 2**64 in uint64
_rng = np.random.default_rng(20220915)
_A = _rng.integers(1, PRIME, size=(BANDS * ROWS, 1), dtype=np.uint64)
_B = _rng.integers(0, PRIME, size=(BANDS * ROWS, 1), dtype=np.uint64)
_WORD = re.compile(r"\w+")


def _h32(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=4).digest(), "little")


def shingles(text: str) -> list[int]:
    """Sorted distinct 32-bit hashes of the lower-cased word 3-grams (a shorter text: one shingle
    of all its words; no words: none)."""
    words = _WORD.findall(text.lower())
    n = min(SHINGLE_WORDS, len(words))
    if n == 0:
        return []
    return sorted({_h32(" ".join(words[i : i + n]).encode()) for i in range(len(words) - n + 1)})


def signature(shingle_hashes: list[int]) -> np.ndarray:
    """MinHash signature (``BANDS * ROWS`` values) of a non-empty shingle set."""
    x = np.asarray(shingle_hashes, dtype=np.uint64)[np.newaxis, :] % np.uint64(PRIME)
    return ((_A * x + _B) % np.uint64(PRIME)).min(axis=1)


def band_keys(sig: np.ndarray) -> list[int]:
    """One signed 64-bit key per band (band index mixed in, so equal keys mean the same band)."""
    keys = []
    for band in range(BANDS):
        rows = sig[band * ROWS : (band + 1) * ROWS].astype("<u8").tobytes()
        digest = hashlib.blake2b(band.to_bytes(2, "little") + rows, digest_size=8).digest()
        keys.append(int.from_bytes(digest, "little", signed=True))
    return keys


def sketch(text: str) -> tuple[list[int], list[int]]:
    """``(shingles, band keys)`` of a text; both empty when it has no words."""
    sh = shingles(text)
    return (sh, band_keys(signature(sh))) if sh else ([], [])


def jaccard(a: list[int], b: list[int]) -> float:
    """Exact Jaccard similarity of two shingle sets (1.0 for two empty sets)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0
