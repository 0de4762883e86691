"""Stable identifiers: the same content gives the same id on every machine and every run."""

from __future__ import annotations

import hashlib


def stable_id(*parts: object, length: int = 16) -> str:
    """Hex digest of the parts joined by an unambiguous separator (``length`` bytes, 2×hex chars)."""
    h = hashlib.blake2b(digest_size=length)
    for part in parts:
        h.update(str(part).encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def stable_seed(*parts: object) -> int:
    """A 63-bit integer seed derived from the parts (for numpy/random generators)."""
    return int(stable_id(*parts, length=8), 16) & ((1 << 63) - 1)
