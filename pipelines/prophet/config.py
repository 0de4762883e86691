"""Configuration of the PROPHET builder: the spec's defaults (paper values where it has them).

The shared options (``--root --force --plan --seed --limit`` and the LLM group with
``--max-new-tokens``) come from ``BuildOptions``; a unit of ``--limit`` is a question, taken in
the importer's order after ``--question-ids``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.options import BuildOptions
from udfs.cli import option
from udfs.prophet.layout import ESTIMATORS, LAYOUTS

NAME = "prophet"
RATING_MODES = ("generate", "score")


@dataclass(frozen=True)
class Config(BuildOptions):
    """Everything a run depends on. Exactly one question source: ``questions`` or ``forecastbench``."""

    questions: str | None = option(
        None,
        help="JSONL or Parquet file of resolved binary questions "
        "(id, question, resolution_date, answer; optional background, resolution_criteria)",
        metavar="FILE",
    )
    forecastbench: tuple[str, str] | None = option(
        None, help="a ForecastBench question set and its resolution set (two JSON files)", metavar="FILE"
    )
    question_ids: tuple[str, ...] = option(
        (), help="keep only these question ids [default: all]", metavar="ID[,...]"
    )
    evidence_only: bool = option(
        False, help="stop after the evidence tables (then --plan gives exact CIL request counts)"
    )
    # evidence (spec §2, §8)
    num_queries: int = option(5, help="queries asked of prompts (b) and (c), at most that many kept", min=1)
    max_words: int = option(8, help="at most N words per generated query", min=1)
    search_depth: int = option(
        50,
        help="BM25 hits per query (published before the question's cutoff, near-duplicates left out)",
        min=1,
    )
    rating: str = option(
        "generate",
        help="relevance rating: generate = paper prompt (d), parse 'Rating: n'; score = expected "
        "rating over 1-6 from one forward pass",
        choices=RATING_MODES,
    )
    top_n: int = option(100, help="evidence articles kept per question (paper N)", min=1)
    context_words: int = option(
        200, help="words of the background and resolution criteria shown in prompts (a)-(d)", min=1
    )
    rating_words: int = option(400, help="words of the article (after its title) in the rating prompt", min=1)
    # CIL (spec §3, §7)
    estimator: str = option(
        "verbalized",
        help="verbalized = reasoning + '*0.62*', r sampled repeats; logprob = Yes/No next-token "
        "probabilities, r = 1",
        choices=ESTIMATORS,
    )
    layout: str = option(
        "listed",
        help="CIL prompt layout: listed (prefix-cache friendly) or grouped (the paper's (e)/(f))",
        choices=LAYOUTS,
    )
    repeats: int | None = option(
        None, help="r, sampled repeats per CIL term [default: 2 for verbalized; logprob is always 1]", min=1
    )
    w: int = option(3, help="window: older 10-day bins an article depends on", min=1)
    k_max: int = option(
        10, help="at most N articles in a window (a window's CIL requests grow as 2^N)", min=0
    )
    cil_words: int = option(60, help="words of each article (after its title) in the CIL prompts", min=1)
    retries: int = option(2, help="retries of verbalized CIL answers that fail to parse (new seeds)", min=0)
    tau: float = option(
        0.0, help="CIL threshold: an article supports the outcome when CIL > tau [default: 0]"
    )
    k: int = option(3, help="L1 when at least k articles have CIL > tau", min=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.questions is None) == (self.forecastbench is None):
            raise ValueError("give exactly one of --questions (a file) and --forecastbench (two files)")
        if self.estimator == "logprob" and self.repeats not in (None, 1):
            raise ValueError("the logprob estimator is deterministic: --repeats must be 1")

    @property
    def r(self) -> int:
        """Repeats per CIL term: ``repeats``, else 2 for verbalized and 1 for logprob."""
        if self.repeats is not None:
            return self.repeats
        return 2 if self.estimator == "verbalized" else 1
