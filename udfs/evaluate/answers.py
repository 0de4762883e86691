"""How forecasters see options and how their answers are read back.

MC options are shown in a seeded order derived from the item id (the permutation is stored);
probabilities come back in the presented order and are mapped to the original one. Generated
answers are parsed by the functions below, each raising ``ParseError`` with a short reason; a
parse failure is a refusal (scored as a uniform forecast, counted as wrong).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from udfs.ids import stable_seed
from udfs.llm_parsing import ParseError, first_json, numbered_list
from udfs.prompts import regex_literal

LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_labels(n: int) -> list[str]:
    """``A``, ``B``, … for ``n`` options."""
    if not 1 <= n <= len(LABELS):
        raise ValueError(f"cannot label {n} options")
    return list(LABELS[:n])


def shuffle_permutation(item_id: str, n: int, seed: int) -> list[int]:
    """Seeded presentation order: position j shows original option ``perm[j]``."""
    perm = list(range(n))
    random.Random(stable_seed(seed, "option-order", item_id)).shuffle(perm)
    return perm


def to_original_order(presented: Sequence[float], perm: Sequence[int]) -> list[float]:
    """Probabilities of the presented positions, re-indexed by original option."""
    original = [0.0] * len(perm)
    for position, option in enumerate(perm):
        original[option] = float(presented[position])
    return original


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().rstrip("%")) / (100.0 if value.strip().endswith("%") else 1.0)
        except ValueError:
            return None
    return None


def parse_label_probabilities(text: str, labels: Sequence[str]) -> list[float]:
    """A verbalized distribution ``{label: probability}``: values clipped to [0, 1] and
    renormalised; labels that are absent get 0. No label found, or a zero sum, is a ParseError."""
    data = first_json(text, dict)
    wanted = {label.lower(): i for i, label in enumerate(labels)}
    values = [0.0] * len(labels)
    found = False
    for key, raw in data.items():
        index = wanted.get(str(key).strip().strip("().").strip().lower())
        number = _number(raw)
        if index is None or number is None or np.isnan(number):
            continue
        values[index] = min(1.0, max(0.0, number))
        found = True
    if not found:
        raise ParseError("no probability for any option label")
    total = sum(values)
    if total <= 0:
        raise ParseError("option probabilities sum to 0")
    return [v / total for v in values]


def parse_verbalized_json(text: str) -> dict[str, Any]:
    """Stage parser for a verbalized distribution whose prompt ends with ``{`` and stops at
    ``}``: the JSON object, re-serialised (labels are checked per item later)."""
    body = (text or "").strip()
    body = body if body.startswith("{") else "{" + body
    body = body if "}" in body else body + "}"
    return {"answer_json": json.dumps(first_json(body, dict))}


_ORDER = re.compile(r"^\s*\(?([A-Z])\)?(?:\s*[,>]\s*\(?([A-Z])\)?)+")


def parse_order_columns(text: str) -> dict[str, Any]:
    """Stage parser: the letters of an ordering answer ``B,A,C`` on its first line (commas or
    ``>`` between letters, a trailing period allowed); checked per item by ``order_from_letters``."""
    line = next((x for x in (text or "").splitlines() if x.strip()), "")
    match = _ORDER.match(line)
    if not match:
        raise ParseError("no comma-separated letter sequence")
    return {"order_letters": "".join(re.findall(r"[A-Z]", match.group(0)))}


TEXT_ASKS = ("yesno", "letter", "probability")  # what a free-text answer is asked for
_YES_NO_WORD = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_PAREN_LETTER = re.compile(r"\(([A-Za-z])\)")
_LEADING_LETTER = re.compile(r"^\s*([A-Za-z])\s*(?:[).:]|$)")
_STARRED = re.compile(r"\*\s*(0(?:\.\d+)?|1(?:\.0+)?|\.\d+)\s*\*")


def text_ask(kind: str) -> str:
    """What the free-text prompt asks an item type for: a probability for binary outcomes
    (PROPHET's ``*0.xx*``), a letter for options, else Yes or No."""
    return {"binary_prob": "probability", "mc": "letter"}.get(kind, "yesno")


def parse_free_text(text: str) -> dict[str, Any]:
    """Stage parser of a free-text answer: the reply as written (read per item by
    ``read_free_text``); an empty reply is a refusal."""
    if not (text or "").strip():
        raise ParseError("empty answer")
    return {"answer_text": text.strip()}


def _normal(text: str) -> str:
    return " ".join(text.lower().strip().strip("\"'").rstrip(".").split())


def read_free_text(
    text: str, ask: str, labels: Sequence[str], options: Sequence[str] = (), reasoned: bool = False
) -> list[float]:
    """The presented-order probabilities a free-text answer states, in the papers' forms:
    ``probability`` — the last ``*p*`` with p in [0, 1] (PROPHET) → [p, 1 − p]; ``yesno`` — the
    first word yes or no (Daily Oracle) → one-hot; ``letter`` — the first ``(x)``, else a reply
    that is exactly one option's text, else a leading ``x.``/``x)``/``x:`` or a lone letter
    (TCELongBench's ``A. <text>.``) → one-hot. The exact text comes before the leading letter
    (Daily Oracle checks it last) because an option may itself start with the word "A".
    ``reasoned`` (ScratchPad, CoT): the answer ends the reply, so the last yes/no word or
    ``(x)`` counts, and the text and letter rules read its last line. Anything else raises
    ParseError: a refusal."""
    if ask == "probability":
        found = _STARRED.findall(text)
        if not found:
            raise ParseError("refusal: no *probability* in the answer")
        p = float(found[-1])
        return [p, 1.0 - p]
    pick = (lambda found: found[-1]) if reasoned else (lambda found: found[0])
    if ask == "yesno":
        words = _YES_NO_WORD.findall(text)
        if not words:
            raise ParseError("refusal: no yes or no in the answer")
        return [1.0, 0.0] if pick(words).lower() == "yes" else [0.0, 1.0]
    wanted = [label.lower() for label in labels]
    lines = [line for line in text.splitlines() if line.strip()]
    answer = lines[-1] if reasoned and lines else text
    named = [i for i, option in enumerate(options) if _normal(option) == _normal(answer)]
    letters = [m for m in _PAREN_LETTER.findall(text) if m.lower() in wanted]
    letter = pick(letters) if letters else None
    if letter is None and not named:
        lead = _LEADING_LETTER.match(answer)
        letter = lead.group(1) if lead and lead.group(1).lower() in wanted else None
    if letter is not None:
        index = wanted.index(letter.lower())
    elif len(named) == 1:
        index = named[0]
    else:
        raise ParseError("refusal: no option named in the answer")
    return [1.0 if i == index else 0.0 for i in range(len(labels))]


_PROBABILITY = r"(0(\.[0-9]{1,3})?|1(\.0{1,3})?)"
MAX_ORDER_CHOICES = 5  # up to 5! = 120 permutations as a choice; longer orders get a letters regex


def order_output(n: int) -> dict[str, Any]:
    """The answer form of an ordering item with ``n`` options, after ``Order:``: one of the
    permutations of its letters (a choice), or for long orders ``n`` comma-separated letters."""
    labels = option_labels(n)
    if n <= MAX_ORDER_CHOICES:
        return {"choice": [" " + ",".join(p) for p in itertools.permutations(labels)]}
    letter = f"[{labels[0]}-{labels[-1]}]"
    return {"regex": f" {letter}(,{letter}){{{n - 1}}}"}


def verbalized_output(labels: Sequence[str]) -> dict[str, Any]:
    """The answer form of a verbalized distribution, continuing the prompt's ``{``: every label
    once, in order, with a decimal in [0, 1] (``"A": 0.25, "B": 0.75``)."""
    return {"regex": ", ".join(f'"{regex_literal(label)}": {_PROBABILITY}' for label in labels)}


def order_from_letters(letters: str, n: int) -> list[int]:
    """Presented-option indexes, earliest first; the letters must name each of the ``n``
    options exactly once."""
    labels = option_labels(n)
    if sorted(letters) != labels:
        raise ParseError(f"order {','.join(letters)} is not a permutation of {','.join(labels)}")
    return [labels.index(x) for x in letters]


def parse_order(text: str, n: int) -> list[int]:
    """An ordering answer as presented-option indexes, earliest first."""
    return order_from_letters(parse_order_columns(text)["order_letters"], n)


def parse_continued_list(text: str) -> dict[str, Any]:
    """Stage parser for an event-list answer whose prompt ends with ``1.``: the numbered items."""
    return {"events": numbered_list("1. " + (text or "").lstrip())}


def parse_short_answer(text: str) -> dict[str, Any]:
    """Stage parser for a short answer: its first non-empty line, trimmed."""
    for line in (text or "").splitlines():
        answer = line.strip().strip("\"'").strip()
        if answer:
            return {"answer": answer}
    raise ParseError("empty answer")


_VERDICT = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)
_LABEL_INDEX = re.compile(r"\((\d{1,3})\)")


def parse_match_verdict(text: str) -> dict[str, Any]:
    """Stage parser for the LRAE stage-1 judge: ``No``, or ``Yes`` with the matched label's
    number in parentheses. Returns the verdict and the 1-based number (None when absent)."""
    match = _VERDICT.match(text or "")
    if not match:
        raise ParseError("no Yes/No verdict")
    yes = match.group(1).lower() == "yes"
    number = _LABEL_INDEX.search(text[match.end() :]) if yes else None
    return {"verdict_yes": yes, "verdict_label": int(number.group(1)) if number else None}


def matched_label(verdict_yes: bool | None, verdict_label: int | None, n_labels: int) -> int | None:
    """The 0-based gold label a stage-1 verdict matched; a Yes without a valid number counts as
    No (OpenForecast spec §7, ours)."""
    if verdict_yes and verdict_label is not None and 1 <= verdict_label <= n_labels:
        return verdict_label - 1
    return None


def dedup_by_similarity(vectors: np.ndarray, threshold: float) -> list[int]:
    """Indexes to keep: each item is dropped when its cosine with an earlier kept item exceeds
    ``threshold`` (vectors are normalised)."""
    kept: list[int] = []
    for i in range(len(vectors)):
        if all(float(vectors[i] @ vectors[j]) <= threshold for j in kept):
            kept.append(i)
    return kept
