"""Options of the TCELongBench builder; defaults follow the spec (the paper's values where it
gives them). The shared options (``--root --force --plan --seed --limit`` and the LLM group with
``--max-new-tokens``) come from ``BuildOptions``; ``--limit N`` keeps the first N TCEs."""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.options import BuildOptions
from udfs.cli import option
from udfs.embeddings import DEFAULT_ENCODER
from udfs.tcelongbench.qa import PLAUSIBLE_MODES


@dataclass(frozen=True)
class Config(BuildOptions):
    """Everything a run depends on. Fields without ``option`` are settable from Python only."""

    # S1 TCE formation
    topic_keywords: tuple[str, ...] = option(
        (), help="keep only articles naming any of these words (title or text)", metavar="WORD[,...]"
    )
    topic_hosts: tuple[str, ...] = option(
        (), help="keep only articles from these hosts", metavar="HOST[,...]"
    )
    languages: tuple[str, ...] = option(
        ("en",), help="ISO 639-1 codes of the articles kept", metavar="CODE[,...]"
    )
    min_chars: int = option(500, help="shortest article text kept, in characters", min=0)
    encoder: str = DEFAULT_ENCODER
    time_weight: float = option(1.0, help="weight of the time feature appended to the embedding", min=0)
    time_scale_days: float = option(14.0, help="days that make one unit of the time feature", min=0.001)
    min_cluster_size: int = option(
        10, help="HDBSCAN min_cluster_size: the fewest articles a TCE cluster holds", min=2
    )
    min_samples: int = option(
        5, help="HDBSCAN min_samples: a higher value leaves more articles as noise", min=1
    )
    min_span_days: int = option(5, help="shortest TCE span kept, in days", min=0)
    max_span_days: int = option(30, help="longest TCE span kept, in days", min=0)
    window_days: int = option(
        120,
        help="days clustered together: formation runs window by window (memory holds one window), "
        "each overlapping the next by --max-span-days + 1",
        min=2,
    )
    max_articles_per_day: int | None = option(
        None, help="keep at most N articles per TCE day, lowest ids first (demo limit)", min=1
    )
    # LLM inputs
    max_article_words: int = option(1000, help="cut every article shown to the model after N words", min=1)
    # S5 key-point filter
    kp_dup_threshold: float = 0.8
    kp_noise_threshold: float = 0.2
    # S6-S8 verification
    evidence_min_match: float | None = option(
        None, help="also require the evidence sentence to fuzzy-match the article (0..1)", min=0, max=1
    )
    plausible_mode: str = option(
        "brief", help="rules of the Plausible check on the four choices", choices=PLAUSIBLE_MODES
    )
    plausible_max_word_spread: int = 10
    plausible_max_cosine: float = 0.8
    verify_rounds: int = 3
    verify_min_pass: int = option(2, help="voting rounds that must pass, out of 3", min=1)
    # S9
    qa_dup_threshold: float = 0.8
    split_ratios: tuple[float, float, float] = (0.7, 0.15, 0.15)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.verify_min_pass <= self.verify_rounds:
            raise ValueError(f"--verify-min-pass must lie in 1..{self.verify_rounds}")
        if self.min_span_days > self.max_span_days:
            raise ValueError("--min-span-days exceeds --max-span-days")
        if self.window_days <= self.max_span_days + 1:
            raise ValueError("--window-days must exceed --max-span-days + 1 (the windows' overlap)")
