"""Configuration of the OpenForecast builder, with the paper's defaults and the demo preset."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pipelines.llm.config import LLMConfig
from pipelines.options import BuildOptions
from udfs.cli import option
from udfs.openforecast.temporal import PAPER_CUTOFFS, SplitCutoffs

NAME = "openforecast"


@dataclass(frozen=True)
class Config(BuildOptions):
    """What to build and how.

    Splits: the paper's cutoffs unless ``test_start`` is given (the spec's rule for newer
    corpora: the day after the evaluated models' latest knowledge cutoff). ``limit`` keeps the
    first N complex-event candidates (WCEP stories by key, then Wikipedia pages by title) before
    any model call.
    """

    wiki_min_words: int = option(200, help="leave out Wikipedia pages of fewer words", min=1)
    min_year: int = option(1950, help="complex events dated before this year are dropped")
    wiki_titles: tuple[str, ...] = option(
        (), help="only this Wikipedia page (repeatable; default: all)", flag="--wiki-title", repeat=True
    )
    wcep_stories: tuple[str, ...] = option(
        (), help="only this WCEP story key, A|B (repeatable; default: all)", flag="--wcep-story", repeat=True
    )
    wcep_min_events: int = option(1, help="portal events a WCEP story needs", min=1)
    max_docs: int = option(
        10,
        help="at most N documents per WCEP complex event, in time order (one complement round each after the first)",
        min=1,
    )
    max_doc_words: int | None = option(
        None, help="cut every document shown to the model after N words [default: the whole text]", min=1
    )
    timeline_samples: int = option(
        3, help="samples per WCEP timeline request (the first parseable one is kept)", min=1
    )
    min_timeline_events: int = option(
        5, help="complex events whose final timeline has fewer atomic events are dropped", min=1
    )
    train_end: dt.date = option(
        PAPER_CUTOFFS.train_end, help="last day of the train split", clears=("test_start",)
    )
    dev_end: dt.date = option(PAPER_CUTOFFS.dev_end, help="last day of the dev split", clears=("test_start",))
    test_end: dt.date = option(
        PAPER_CUTOFFS.test_end, help="last day of the test split", clears=("test_start",)
    )
    test_start: dt.date | None = option(
        None, help="first test day; derives the three split dates (instead of --train/dev/test-end)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        ends = (self.train_end, self.dev_end, self.test_end)
        paper = (PAPER_CUTOFFS.train_end, PAPER_CUTOFFS.dev_end, PAPER_CUTOFFS.test_end)
        if self.test_start is not None and ends != paper:
            raise ValueError("--test-start derives the three split dates; give it or --train/dev/test-end")
        _ = self.cutoffs  # the split dates must be in order

    @property
    def cutoffs(self) -> SplitCutoffs:
        if self.test_start is not None:
            return SplitCutoffs.from_test_start(self.test_start)
        return SplitCutoffs(self.train_end, self.dev_end, self.test_end)


# The demo: the sample Wikipedia pages and three WCEP stories of at least five events whose
# first documents fall into the three splits of test_start = 2026-03-01 (train up to
# 2025-12-31, dev 2026-01-01..2026-02-28, test 2026-03-01..2026-09-30).
DEMO_STORIES = (
    "Afghanistan–Pakistan clashes|2025 Afghanistan–Pakistan conflict",
    "Syrian conflict|SDF–Syrian transitional government clashes",
    "Sudanese cholera epidemic",
)
DEMO: dict[str, Any] = {
    "wcep_stories": DEMO_STORIES,
    "wcep_min_events": 5,
    "max_docs": 2,
    "max_doc_words": 120,
    "timeline_samples": 1,
    "min_timeline_events": 3,
    "test_start": dt.date(2026, 3, 1),
}
# A timeline answer is the whole timeline, so the cap bounds its length: 128 tokens fit five items
# of up to 64 characters (udfs.openforecast.outputs.fitted), and one structured event.
DEMO_MAX_NEW_TOKENS = 128
PRESETS = {
    "demo": (
        "the demo preset: 3 WCEP stories, small limits, 128 new tokens",
        {**DEMO, "llm": {"max_new_tokens": DEMO_MAX_NEW_TOKENS}},
    )
}


def demo_config(root: str, llm: LLMConfig | None = None) -> Config:
    """Small limits so every stage runs on the embedded CPU model in a few minutes."""
    return Config(root=root, llm=(llm or LLMConfig()).replace(max_new_tokens=DEMO_MAX_NEW_TOKENS), **DEMO)
