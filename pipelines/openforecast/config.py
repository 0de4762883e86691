"""Configuration of the OpenForecast builder, with the paper's defaults and the demo preset."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pipelines.llm.config import LLMConfig
from udfs.openforecast.temporal import PAPER_CUTOFFS, SplitCutoffs

NAME = "openforecast"


@dataclass(frozen=True)
class Config:
    """What to build and how.

    Splits: the paper's cutoffs unless ``test_start`` is given (the spec's rule for newer
    corpora: the day after the evaluated models' latest knowledge cutoff). ``wiki_titles`` and
    ``wcep_stories`` restrict the input to named pages / story keys (``A|B`` for a sub-story);
    empty means all. ``max_doc_words`` cuts every document shown to the model (for models with
    a short context); ``max_new_tokens`` caps every generation; ``timeline_samples`` is the
    number of samples per WCEP timeline request (the first parseable one is kept).
    """

    root: str
    llm: LLMConfig = field(default_factory=LLMConfig)
    force: bool = False
    seed: int = 0
    wiki_min_words: int = 200
    min_year: int = 1950
    wiki_titles: tuple[str, ...] = ()
    wcep_stories: tuple[str, ...] = ()
    wcep_min_events: int = 1
    max_docs: int = 10
    max_doc_words: int | None = None
    timeline_samples: int = 3
    min_timeline_events: int = 5
    max_new_tokens: int | None = None
    train_end: dt.date = PAPER_CUTOFFS.train_end
    dev_end: dt.date = PAPER_CUTOFFS.dev_end
    test_end: dt.date = PAPER_CUTOFFS.test_end
    test_start: dt.date | None = None

    def __post_init__(self) -> None:
        if self.max_docs < 1 or self.timeline_samples < 1 or self.min_timeline_events < 1:
            raise ValueError("max_docs, timeline_samples and min_timeline_events must be positive")
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


def demo_config(root: str, llm: LLMConfig | None = None) -> Config:
    """Small limits so every stage runs on the embedded CPU model in a few minutes."""
    return Config(
        root=root,
        llm=llm or LLMConfig(),
        wcep_stories=DEMO_STORIES,
        wcep_min_events=5,
        max_docs=2,
        max_doc_words=120,
        timeline_samples=1,
        min_timeline_events=3,
        max_new_tokens=40,
        test_start=dt.date(2026, 3, 1),
    )
