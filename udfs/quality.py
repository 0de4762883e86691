"""Deterministic checks that a generated item reads as a question a person would ask.

Structured outputs guarantee that an answer parses, not that it is a question: a small model
(or a large one at its token cap) still writes loops ("Answer 2 will be. Answer 2 will be."),
echoes the prompt's field names or few-shot examples, leaves placeholders, or stops mid-word.
``question_problems`` names every such finding with a short reason; the builder driver rejects
an item with any finding (reason ``quality_<name>``) before the evaluation items are written, and
``near_duplicates`` keeps the earliest of items that say nearly the same thing. Everything here
is a pure function of its text and the thresholds in ``QualityOptions``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from udfs import near_dup
from udfs.cli import check_options, option

PROBLEMS = (
    "repeated_ngram",  # a phrase loops
    "template_residue",  # a prompt's field name or answer label in the text
    "placeholder",  # an unfilled template slot
    "copied_example",  # a few-shot example of the prompt, echoed
    "few_content_words",  # too little said
    "not_a_question",  # asks nothing
    "truncated",  # stops mid-sentence (the token cap)
    "empty_choice",
    "duplicate_choices",
    "answer_in_question",  # the gold answer is stated in the question
    "off_source",  # about something its source text never mentions
)


@dataclass(frozen=True)
class QualityOptions:
    """The thresholds of the question checks; the defaults pass hand-written questions in the
    papers' styles and real ForecastBench questions, and catch the embedded model's loops."""

    loop_words: int = option(
        3,
        flag="--quality-loop-words",
        help="a phrase of at least this many words said twice in a row is a loop (shorter phrases: three times)",
        min=1,
    )
    min_distinct_ngrams: float = option(
        0.5,
        flag="--quality-min-distinct-ngrams",
        help="a question of 6 or more word 3-grams in which fewer than this share are distinct is a loop",
        min=0.0,
        max=1.0,
    )
    min_content_words: int = option(
        3,
        flag="--quality-min-content-words",
        help="fewest distinct words that are not function words, question words or numbers",
        min=1,
    )
    example_overlap: float = option(
        0.8,
        flag="--quality-example-overlap",
        help="a question whose word 3-grams lie in a prompt's text at least this share is a copied example",
        min=0.0,
        max=1.0,
    )
    min_source_overlap: float = option(
        0.25,
        flag="--quality-min-source-overlap",
        help="a generated question fewer than this share of whose content words (by their first five "
        "letters) occur in the text it was written from is off its source",
        min=0.0,
        max=1.0,
    )
    near_duplicate: float = option(
        0.8,
        flag="--quality-near-duplicate",
        help="Jaccard similarity of word 3-gram sets (question, choices and gold text) at or above which "
        "an item repeats an earlier one of its benchmark and is rejected",
        min=0.0,
        max=1.0,
    )

    def __post_init__(self) -> None:
        check_options(self)


DEFAULTS = QualityOptions()

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_FUNCTION_TEXT = """a an the this that these those it its they them their there here he she his her him we us our
    you your i me my of in on at to for from by with without about into onto over under between among
    through during before after until since than then as and or nor but if so not no yes be is are was
    were been being am do does did done have has had having will would shall should can could may might
    must what who whom whose which when where why how whether any some all each every other another
    such more most less least many much few very also just only still even again ever up down out off
    next last new per via"""
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_INTERROGATIVE_TEXT = """will would shall should can could may might must is are was were am do does did has have had
    what who whom whose which when where why how whether"""
_INTERROGATIVES = frozenset(_INTERROGATIVE_TEXT.split())
# an answer label or a prompt's field name written into the text: "Answer 2", "Question:",
# "Keypoint:", "(b) ..." as an option line, "Noising Answers", the question speaking of its own
# answer ("What will the answer be", a quoted "Yes" or "What will")
_RESIDUE = re.compile(
    r"\b(?:question|answer|option|choice)\s*#?\d+\b"
    r"|\b(?:questions?|answers?|key\s*points?|summary|background|options?|choices?|reasoning)\s*\d*\s*:"
    r"|^\s*[qa]\s*\d*\s*[:.)]\s|\bnoising\s+answers?\b|^\s*\([a-e]\)\s"
    r"|\bthe\s+answer\s+(?:be|is|will)\b|[\"“]\s*(?:yes|no|what will|who will)\s*[\"”]",
    re.IGNORECASE | re.MULTILINE,
)
_PLACEHOLDER = re.compile(
    r"\{\{?\s*[\w .]*\}\}?|<\s*[a-z_][\w ]*>|\[\s*(?:insert|name|date|event|entity|person|place|"
    r"organi[sz]ation|country|topic|number|x|y|mask|blank|answer|question)\b[^\]]*\]|\bX{3,}\b|_{3,}",
    re.IGNORECASE,
)
LOOP_SCAN_WORDS = 300  # a loop shows within the first words; longer texts are not scanned further
_FINAL = re.compile(r"[?.!…]['\"”’)\]]*\s*$")


def words(text: str) -> list[str]:
    """The lower-cased words of a text (letters and digits; apostrophes inside a word kept)."""
    return [w.casefold() for w in _WORD.findall(text or "")]


def content_words(text: str) -> list[str]:
    """Words that carry content: not function or question words, not bare numbers."""
    return [w for w in words(text) if w not in _FUNCTION_WORDS and not w.isdigit() and len(w) > 1]


def _norm(text: str) -> str:
    return " ".join(words(text))


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def loops(question: str, options: QualityOptions = DEFAULTS) -> bool:
    """The text repeats itself: a phrase of ``loop_words`` or more words twice in a row, a
    shorter one three times in a row, or too few distinct word 3-grams. A long text that comes
    back to the same phrase now and then (a definition restated) is no loop."""
    tokens = words(question)[:LOOP_SCAN_WORDS]
    n = len(tokens)
    for size in range(1, n // 2 + 1):
        copies = 2 if size >= options.loop_words else 3
        for start in range(n - copies * size + 1):
            phrase = tokens[start : start + size]
            if all(tokens[start + c * size : start + (c + 1) * size] == phrase for c in range(1, copies)):
                return True
    grams = _ngrams(tokens, 3)
    return len(grams) >= 6 and len(set(grams)) / len(grams) < options.min_distinct_ngrams


def copied(question: str, examples: Sequence[str], options: QualityOptions = DEFAULTS) -> bool:
    """Most of the question's word 3-grams (it has at least four) occur in one of ``examples``
    (the prompts' texts): the model echoed a few-shot example instead of writing its own."""
    grams = set(_ngrams(words(question), 3))
    if len(grams) < 4:
        return False
    for example in examples:
        shown = set(_ngrams(words(example), 3))
        if len(grams & shown) / len(grams) >= options.example_overlap:
            return True
    return False


def _phrase_in(phrase: str, text: str) -> bool:
    """Whether ``phrase`` occurs in ``text`` as whole words (both normalised)."""
    p, t = _norm(phrase), _norm(text)
    return bool(p) and f" {p} " in f" {t} "


def stems(text: str) -> set[str]:
    """The first five letters of each content word: "refugees" and "refugee", "noticed" and
    "notice" meet (a crude, language-blind stem)."""
    return {w[:5] for w in content_words(text)}


def off_source(question: str, source: str, options: QualityOptions = DEFAULTS) -> bool:
    """Too few of the question's content words occur in the text it was written from: the model
    asked about something else (a few-shot example's story, an invented scene)."""
    asked = stems(question)
    return bool(asked) and len(asked & stems(source)) / len(asked) < options.min_source_overlap


def answer_stated(question: str, answer: str, choices: Sequence[str] | None) -> bool:
    """The gold answer (not a bare yes/no, with a content word) appears in the question while no
    other choice does: the question gives itself away."""
    if _norm(answer) in ("yes", "no") or not content_words(answer) or not _phrase_in(answer, question):
        return False
    others = [c for c in choices or () if _norm(c) != _norm(answer)]
    return not any(_phrase_in(c, question) for c in others if content_words(c))


def question_problems(
    question: str,
    choices: Sequence[str] | None = None,
    answer: str | None = None,
    *,
    asks: bool = True,
    examples: Sequence[str] = (),
    source: str | None = None,
    options: QualityOptions = DEFAULTS,
) -> list[str]:
    """Every problem of one item's text, as names from ``PROBLEMS`` in that order (empty: none).

    ``choices`` are the item's options (yes/no included), ``answer`` its gold text; ``asks``
    says the text must ask something (yes/no and multiple-choice questions), unlike an ordering
    instruction; ``examples`` are the texts of the prompts that generated it; ``source`` is the
    text it was written from (an article, a key point), when the builder knows it."""
    text = (question or "").strip()
    found = set()
    if loops(text, options):
        found.add("repeated_ngram")
    if _RESIDUE.search(text):
        found.add("template_residue")
    if _PLACEHOLDER.search(text):
        found.add("placeholder")
    if examples and copied(text, examples, options):
        found.add("copied_example")
    if len(set(content_words(text))) < options.min_content_words:
        found.add("few_content_words")
    tokens = words(text)
    if asks and "?" not in text and not (tokens and tokens[0] in _INTERROGATIVES):
        found.add("not_a_question")
    if text and not _FINAL.search(text):
        found.add("truncated")
    if choices is not None:
        normed = [_norm(c) for c in choices]
        if any(not n for n in normed):
            found.add("empty_choice")
        if len(set(n for n in normed if n)) < len([n for n in normed if n]):
            found.add("duplicate_choices")
    if answer and answer_stated(text, answer, choices):
        found.add("answer_in_question")
    if source is not None and off_source(text, source, options):
        found.add("off_source")
    return [p for p in PROBLEMS if p in found]


def dedup_text(question: str | None, choices: Sequence[str] | None, gold_texts: Sequence[str] | None) -> str:
    """What near-duplicate detection compares: the question with its choices and gold texts (a
    fixed question, such as OpenForecast's "what happens next", differs by its gold)."""
    return " ".join([question or "", *(choices or ()), *(gold_texts or ())])


def near_duplicates(texts: Sequence[str], threshold: float = DEFAULTS.near_duplicate) -> list[int | None]:
    """For each text, the index of the earliest text before it whose word 3-gram set has Jaccard
    similarity at least ``threshold`` with it (None: it is the first of its kind). Candidates
    come from MinHash bands (``udfs.near_dup``); each is confirmed by its exact similarity."""
    sketches = [near_dup.sketch(_norm(t)) for t in texts]
    seen: dict[int, list[int]] = {}
    out: list[int | None] = []
    for i, (shingles, bands) in enumerate(sketches):
        candidates = sorted({j for b in bands for j in seen.get(b, ())})
        first = next((j for j in candidates if near_dup.jaccard(shingles, sketches[j][0]) >= threshold), None)
        out.append(first)
        if first is None:
            for b in bands:
                seen.setdefault(b, []).append(i)
    return out


def item_problems(
    item: dict,
    *,
    fixed: Sequence[re.Pattern[str]] = (),
    examples: Sequence[str] = (),
    source: str | None = None,
    options: QualityOptions = DEFAULTS,
) -> list[str]:
    """``question_problems`` of one evaluation item (``udfs.eval_items``): its question, choices
    and gold text. A question the builder writes from a fixed template (``fixed``, e.g.
    OpenForecast's "Which of these events will happen?") is its builder's, not the model's: only
    the text of the pattern's ``generated`` group, if any, is checked, as a statement."""
    question, choices = item.get("question") or "", item.get("choices")
    gold = item.get("gold_index")
    answer = choices[gold] if choices and gold is not None else (item.get("gold_texts") or [None])[0]
    template = next((m for p in fixed if (m := p.fullmatch(question))), None)
    if template is None:
        asks = item.get("type") != "ordering"
        return question_problems(
            question, choices, answer, asks=asks, examples=examples, source=source, options=options
        )
    generated = template.groupdict().get("generated")
    found = (
        set(question_problems(generated, asks=False, examples=examples, source=source, options=options))
        if generated
        else set()
    )
    found.discard("truncated")  # a generated statement needs no final stop
    if choices is not None:
        found |= set(question_problems(".", choices, asks=False, options=options)) & {
            "empty_choice",
            "duplicate_choices",
        }
    return [p for p in PROBLEMS if p in found]
