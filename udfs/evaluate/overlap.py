"""Word-overlap scores of a short open answer against its gold answers (TCELongBench S10: BLEU
and METEOR for open forecasts), with NLTK's implementations.

- **BLEU**: sentence BLEU-4 against every gold answer, NLTK smoothing method 1 (short answers
  rarely share 4-grams), × 100;
- **METEOR**: NLTK's METEOR (α 0.9, β 3, γ 0.5) with its exact and Porter-stem matching stages
  and **no WordNet synonym stage**: WordNet is a data download that cannot be installed offline,
  so synonyms never match (scores can only be lower than with WordNet), × 100.

Both lowercase and split on word characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORDS = re.compile(r"\w+")


class _NoSynonyms:
    """Stands in for NLTK's WordNet reader: no word has synonyms."""

    def synsets(self, word: str) -> list:
        return []


def tokens(text: str) -> list[str]:
    return _WORDS.findall((text or "").lower())


def bleu(prediction: str, references: Sequence[str]) -> float:
    """Sentence BLEU-4 × 100 (smoothing method 1); 0 for an empty prediction."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hypothesis = tokens(prediction)
    if not hypothesis:
        return 0.0
    refs = [tokens(r) for r in references]
    return 100.0 * sentence_bleu(refs, hypothesis, smoothing_function=SmoothingFunction().method1)


def meteor(prediction: str, references: Sequence[str]) -> float:
    """METEOR × 100 with exact and stem matching (the best over the references)."""
    from nltk.translate.meteor_score import meteor_score

    hypothesis = tokens(prediction)
    if not hypothesis:
        return 0.0
    return 100.0 * meteor_score([tokens(r) for r in references], hypothesis, wordnet=_NoSynonyms())
