"""What the example builder's steps hand each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class State:
    """``articles``: the dated articles kept (id, title, publication time); ``questions``: the
    parsed question of each."""

    articles: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
