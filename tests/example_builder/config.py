"""Options of the example builder."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.options import BuildOptions
from udfs.cli import option

NAME = "example"


@dataclass(frozen=True)
class Config(BuildOptions):
    """Which headlines become questions; ``--limit N`` keeps the N oldest."""

    min_title_words: int = option(3, help="leave out articles whose title has fewer words", min=1)
