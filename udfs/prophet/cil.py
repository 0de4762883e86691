"""Causal Intervened Likelihood: binning, windows, the adjustment sum and the L1/L2 rule (spec §3, §7).

Articles are binned in 10-day groups counted back from the resolution date D (bin 0 = the ten
days just before D). An article's window is the set of articles in the ``w`` older bins; every
article of a bin shares its bin's window, so the joint table P(X_W = a) is a property of the bin.
For article i with window W of size K:

    P(Y=Ŷ | do(X_i=x)) = Σ_a P(Y=Ŷ | X_i=x, X_W=a) · π(a),   π(a) = q(a) / Σ q
    CIL_i = P(Y=Ŷ | do(X_i=1)) − P(Y=Ŷ | do(X_i=0))

Assignments are bit strings over the window in its prompt order ("" when K = 0, where π = 1).
Everything here is pure: the probabilities come in as numbers, whichever estimator made them.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from udfs.timeutil import to_utc

BIN = dt.timedelta(days=10)
NOON = dt.time(12, 0)
MIDNIGHT = dt.time(0, 0)
SPLITS = ("L1", "L2", "none")


@dataclass(frozen=True)
class EvidenceArticle:
    """What the CIL math needs of a kept article: its id, publication instant and rating."""

    article_id: str
    published_at: dt.datetime
    rating: int


@dataclass(frozen=True)
class Window:
    """The window of one bin: the kept article ids in prompt order (oldest first) and the size
    before the K_max cap."""

    bin: int
    article_ids: tuple[str, ...]
    k_raw: int

    @property
    def k(self) -> int:
        return len(self.article_ids)

    @property
    def truncated(self) -> bool:
        return self.k_raw > self.k


@dataclass(frozen=True)
class CilTerms:
    p_do1: float
    p_do0: float
    cil: float


def cutoff_instant(resolution_date: dt.date) -> dt.datetime:
    """D as an instant: 00:00 UTC of the resolution date (§7.1)."""
    return to_utc(resolution_date)


def publication_instant(value: dt.datetime | dt.date | None) -> dt.datetime | None:
    """An article's publication instant in UTC (§7.1): naive datetimes are UTC; a date-only value
    is 12:00 UTC of its date; None stays None (an undated article, §7.9). The corpus stores a
    date-only publication as 00:00:00 UTC of its date, so a datetime at exactly 00:00:00.000000
    UTC is read as date-only too."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        utc = to_utc(value)
        if utc.time() != MIDNIGHT:
            return utc
        value = utc.date()
    return dt.datetime.combine(value, NOON, tzinfo=dt.UTC)


def bin_index(published: dt.datetime | dt.date, resolution_date: dt.date) -> int:
    """g = floor((D − t) / 10 days); raises ValueError for an article not strictly before D."""
    t = publication_instant(published)
    limit = cutoff_instant(resolution_date)
    if t is None or t >= limit:
        raise ValueError(f"article at {t} is not strictly before D = {limit.isoformat()}")
    return (limit - t) // BIN


def truncation_key(article: EvidenceArticle) -> tuple:
    """Which window articles survive the K_max cap first: highest rating, then most recent, then
    article_id ascending (§7.7)."""
    return (-article.rating, -article.published_at.timestamp(), article.article_id)


def prompt_order_key(article: EvidenceArticle) -> tuple:
    """The fixed order of a window in every prompt: chronological, then article_id."""
    return (article.published_at, article.article_id)


def bin_articles(
    articles: Iterable[EvidenceArticle], resolution_date: dt.date
) -> dict[int, list[EvidenceArticle]]:
    """Articles grouped by bin (only non-empty bins), each group in prompt order."""
    groups: dict[int, list[EvidenceArticle]] = {}
    for a in articles:
        groups.setdefault(bin_index(a.published_at, resolution_date), []).append(a)
    return {g: sorted(group, key=prompt_order_key) for g, group in sorted(groups.items())}


def bin_windows(bins: Mapping[int, Sequence[EvidenceArticle]], w: int, k_max: int) -> dict[int, Window]:
    """The window of every non-empty bin g: the articles of bins g+1 … g+w, capped to ``k_max``."""
    if w < 1 or k_max < 0:
        raise ValueError("w must be >= 1 and k_max >= 0")
    windows = {}
    for g in bins:
        members = [a for h in range(g + 1, g + w + 1) for a in bins.get(h, ())]
        kept = sorted(members, key=truncation_key)[:k_max]
        windows[g] = Window(g, tuple(a.article_id for a in sorted(kept, key=prompt_order_key)), len(members))
    return windows


def assignments(k: int) -> list[str]:
    """All 2^k assignments as bit strings; character j is the status of window article j."""
    return ["".join(bits) for bits in itertools.product("01", repeat=k)]


def normalize_joint(raw: Mapping[str, float]) -> tuple[dict[str, float], bool]:
    """π(a) = q(a) / Σ q (§7.5). When Σ q is 0 (or not finite) π is uniform and the flag is set."""
    total = math.fsum(raw.values())
    if not raw:
        raise ValueError("empty joint table")
    if total <= 0 or not math.isfinite(total):
        return {a: 1.0 / len(raw) for a in raw}, True
    return {a: q / total for a, q in raw.items()}, False


def outcome_probability(p_yes: float, answer: int) -> float:
    """P(Y = Ŷ | …) from the model's P(answer is Yes | …) (§3.7)."""
    return p_yes if answer == 1 else 1.0 - p_yes


def intervened_probability(pi: Mapping[str, float], p_yes: Mapping[str, float], answer: int) -> float:
    """P(Y=Ŷ | do(X_i=x)) = Σ_a π(a) · P(Y=Ŷ | X_i=x, X_W=a)."""
    return math.fsum(pi[a] * outcome_probability(p_yes[a], answer) for a in pi)


def cil_terms(
    pi: Mapping[str, float], p_yes_do1: Mapping[str, float], p_yes_do0: Mapping[str, float], answer: int
) -> CilTerms:
    """Both intervened probabilities and their difference, the CIL of one article."""
    p1 = intervened_probability(pi, p_yes_do1, answer)
    p0 = intervened_probability(pi, p_yes_do0, answer)
    return CilTerms(p1, p0, p1 - p0)


def split_question(cils: Sequence[float | None], tau: float, k: int) -> tuple[str, int, str]:
    """(split, #{CIL > tau}, reason): L1 when at least k articles have CIL strictly above tau,
    L2 otherwise, ``none`` without evidence (§7.8, §7.10). A failed CIL (None) never counts."""
    if not cils:
        return "none", 0, "no_evidence_before_D"
    above = sum(1 for c in cils if c is not None and c > tau)
    if above >= k:
        return "L1", above, f"at_least_{k}_above_tau"
    return "L2", above, f"fewer_than_{k}_above_tau"
