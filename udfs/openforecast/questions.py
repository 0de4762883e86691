"""Question sampling for the six tasks (n = timeline length, cut k ⇒ X = e[:k], Y = e[k:]).

Cut ranges and counts follow the released code (spec §5); every draw uses a generator seeded by
(global seed, task, CE id), so a rebuild gives the same questions. Only cuts with a valid cut
time count (``udfs.openforecast.temporal.cut_time``): a cut whose background is not before its
targets, or a dev/test cut before the split's first day, is never drawn.

- LTF: 2 cuts in [⌊2n/3⌋, n−2] (train) or [⌊2n/3⌋−1, n−2] (dev/test), else 1 in
  [⌊2n/3⌋−1, n−2]; gold = e[k:].
- STF: up to 2 full dates whose first event has index ≥ 2; X = events before it; gold = every
  event of that date.
- AQA/MCAC: 1 cut in [⌊2n/3⌋, n−2], up to 2 target events of Y with structured arguments; the
  argument is drawn from type plus time/location/subject/object (present on the target and
  non-null at least 3 times in the CE; time removed with probability 0.5).
- MCNC: 1 (train) or 2 (dev/test) cuts in [⌊2n/3⌋, n−3]; per cut the true events are e[k] and up
  to 2 random later events; the model writes 3 negatives per true event.
- VQA: per kept MCNC question, the gold event (Yes) or one negative (No) with probability 0.5.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from udfs.ids import stable_id, stable_seed
from udfs.llm_parsing import ParseError, labelled_fields
from udfs.openforecast.dates import Period, is_full_date, period
from udfs.openforecast.structured import QUESTION_ARGUMENTS, argument_counts, has_argument
from udfs.openforecast.temporal import NoCutError, assert_before_cut, assert_not_before_cut, cut_time

TASKS = ("stf", "ltf", "aqa", "mcnc", "mcac", "vqa")
MIN_EVENTS = 5  # LTF, AQA and MCAC need at least this many events (and the builder drops shorter CEs)
MIN_ARGUMENT_VALUES = 3  # an argument type is asked about only if the CE names it this often
ARGUMENT_NAMES = {
    "type": "event type",
    "time": "time",
    "location": "location",
    "subject": "subject",
    "object": "object",
}
NEGATIVES_PREFIX = "A:"
MCAC_PREFIX = "Question:"
MCAC_LABELS = ["Question", "True answer", "Wrong answer A", "Wrong answer B", "Wrong answer C"]
LETTERS = "ABCD"


@dataclass(frozen=True)
class AtomicEvent:
    text: str
    ts: str | None = None  # yyyy, yyyy-MM or yyyy-MM-dd when the event states it
    structured: tuple[dict[str, Any], ...] | None = None  # None when extraction failed


@dataclass(frozen=True)
class CETimeline:
    """What the samplers read of one complex event."""

    ce_id: str
    split: str
    split_start: dt.date | None
    category: str | None
    events: tuple[AtomicEvent, ...]

    @property
    def periods(self) -> list[Period | None]:
        return [period(e.ts) for e in self.events]

    def rng(self, seed: int, task: str) -> random.Random:
        return random.Random(stable_seed(seed, task, self.ce_id))


Drawn = tuple[list[dict[str, Any]], str | None]  # samples, and the reason when there are none


def _valid_cuts(tl: CETimeline, ks: range) -> tuple[dict[int, dt.date], Counter]:
    periods = tl.periods
    valid: dict[int, dt.date] = {}
    why: Counter = Counter()
    for k in ks:
        try:
            valid[k] = cut_time(periods, k, tl.split_start)
        except NoCutError as exc:
            why[str(exc)] += 1
    return valid, why


def _no_cut(why: Counter, empty_reason: str) -> str:
    return why.most_common(1)[0][0] if why else empty_reason


def _base(tl: CETimeline, task: str, k: int, t_cut: dt.date, key: object) -> dict[str, Any]:
    return {
        "sample_id": stable_id("openforecast", task, tl.ce_id, k, key),
        "task": task,
        "ce_id": tl.ce_id,
        "split": tl.split,
        "category": tl.category,
        "cut_idx": k,
        "t_cut": t_cut,
        "background": [e.text for e in tl.events[:k]],
    }


def sample_ltf(tl: CETimeline, seed: int) -> Drawn:
    n = len(tl.events)
    if n < MIN_EVENTS:
        return [], "too_few_events"
    lo = 2 * n // 3
    wide, why = _valid_cuts(tl, range(max(1, lo - 1), n - 1))
    narrow = [k for k in wide if k >= lo] if tl.split == "train" else list(wide)
    rng = tl.rng(seed, "ltf")
    if len(narrow) >= 2:
        cuts = rng.sample(sorted(narrow), 2)
    elif wide:
        cuts = [rng.choice(sorted(wide))]
    else:
        return [], _no_cut(why, "no_cut_range")
    samples = []
    for k in sorted(cuts):
        s = _base(tl, "ltf", k, wide[k], "")
        s.update(target_idx=list(range(k, n)), gold_texts=[e.text for e in tl.events[k:]], question=None)
        samples.append(s)
    return samples, None


def sample_stf(tl: CETimeline, seed: int, max_dates: int = 2) -> Drawn:
    first: dict[str, int] = {}
    for i, e in enumerate(tl.events):
        if is_full_date(e.ts):
            first.setdefault(e.ts, i)
    candidates = {day: k for day, k in first.items() if k >= 2}
    if not candidates:
        return [], "no_dated_target_day"
    periods = tl.periods
    valid: dict[str, dt.date] = {}
    why: Counter = Counter()
    for day, k in candidates.items():
        try:
            valid[day] = cut_time(periods, k, tl.split_start)
        except NoCutError as exc:
            why[str(exc)] += 1
    if not valid:
        return [], _no_cut(why, "no_dated_target_day")
    rng = tl.rng(seed, "stf")
    days = rng.sample(sorted(valid), min(max_dates, len(valid)))
    samples = []
    for day in sorted(days):
        k = candidates[day]
        s = _base(tl, "stf", k, valid[day], day)
        gold = [i for i, e in enumerate(tl.events) if e.ts == day]
        s.update(
            target_idx=gold,
            gold_texts=[tl.events[i].text for i in gold],
            target_day=day,
            question=f"What will happen on {day}?",
        )
        samples.append(s)
    return samples, None


def argument_targets(tl: CETimeline, seed: int, max_targets: int = 2) -> Drawn:
    """AQA/MCAC generation requests: one cut, up to ``max_targets`` targets, one argument each."""
    n = len(tl.events)
    if n < MIN_EVENTS:
        return [], "too_few_events"
    lo = 2 * n // 3
    valid, why = _valid_cuts(tl, range(lo, n - 1))
    if not valid:
        return [], _no_cut(why, "no_cut_range")
    rng = tl.rng(seed, "aqa")
    k = rng.choice(sorted(valid))
    structured = [i for i in range(k, n) if tl.events[i].structured]
    if not structured:
        return [], "no_structured_target"
    counts = argument_counts(e.structured for e in tl.events)
    requests = []
    for j in sorted(rng.sample(structured, min(max_targets, len(structured)))):
        target = tl.events[j].structured
        allowed = ["type"] + [
            a for a in QUESTION_ARGUMENTS if counts[a] >= MIN_ARGUMENT_VALUES and has_argument(target, a)
        ]
        if "time" in allowed and rng.random() < 0.5:
            allowed.remove("time")
        argument = rng.choice(allowed)
        r = _base(tl, "aqa", k, valid[k], j)
        r.update(
            target_idx=[j],
            argument=argument,
            argument_name=ARGUMENT_NAMES[argument],
            target_event=tl.events[j].text,
            other_events=[e.text for i, e in enumerate(tl.events[k:], k) if i != j],
        )
        requests.append(r)
    return requests, None


def mcnc_targets(tl: CETimeline, seed: int) -> Drawn:
    """MCNC negative-generation requests: the cuts and their true events."""
    n = len(tl.events)
    lo = 2 * n // 3
    valid, why = _valid_cuts(tl, range(max(1, lo), n - 2))
    wanted = 1 if tl.split == "train" else 2
    if len(valid) < wanted:
        return [], _no_cut(why, "no_cut_range") if not valid else "too_few_cuts"
    rng = tl.rng(seed, "mcnc")
    requests = []
    for k in sorted(rng.sample(sorted(valid), wanted)):
        later = list(range(k + 1, n))
        for j in [k, *sorted(rng.sample(later, min(2, len(later))))]:
            r = _base(tl, "mcnc", k, valid[k], j)
            r.update(
                target_idx=[j],
                true_event=tl.events[j].text,
                future_events=[e.text for e in tl.events[k:]],
            )
            requests.append(r)
    return requests, None


def _clean(text: str) -> str:
    return " ".join(text.split()).strip().strip("\"'“”").strip()


def _same(a: str, b: str) -> bool:
    return _clean(a).casefold().rstrip(".") == _clean(b).casefold().rstrip(".")


_NEGATIVE_LINE = re.compile(
    r"^\s*[*#\-]*\s*(?:(?:noisy|negative|wrong|false|candidate)\s+)*(?:event|answer|option)?\s*"
    r"\(?([ABC])\)?\s*[:.)]\s*[*_]*\s*(.*)$",
    re.IGNORECASE,
)


def parse_negatives(text: str) -> dict[str, list[str]]:
    """Three labelled negatives ``A: … B: … C: …`` (the answer continues ``NEGATIVES_PREFIX``)."""
    body = f"{NEGATIVES_PREFIX} {text or ''}"
    found: dict[str, str] = {}
    for line in body.splitlines():
        m = _NEGATIVE_LINE.match(line)
        if m and m.group(1).upper() not in found and _clean(m.group(2)):
            found[m.group(1).upper()] = _clean(m.group(2))
        if len(found) == 3:
            break
    if len(found) != 3:
        raise ParseError(f"expected negatives A, B and C, found {sorted(found) or 'none'}")
    return {"negatives": [found[c] for c in "ABC"]}


def parse_mcac(text: str) -> dict[str, Any]:
    """Question, true answer and three wrong answers (the answer continues ``MCAC_PREFIX``)."""
    fields = labelled_fields(f"{MCAC_PREFIX} {text or ''}", MCAC_LABELS)
    first = {k: _clean(v.strip().splitlines()[0]) for k, v in fields.items()}
    return {
        "question": first["Question"],
        "true_answer": first["True answer"],
        "wrong_answers": [first[f"Wrong answer {c}"] for c in "ABC"],
    }


def distractor_problem(gold: str, wrong: Sequence[str]) -> str | None:
    """Why a gold answer and its 3 wrong candidates cannot make a 4-option question, or None."""
    if len(wrong) != 3 or not all(_clean(w) for w in wrong):
        return "not_three_candidates"
    if any(_same(w, gold) for w in wrong):
        return "candidate_equals_gold"
    if len({_clean(w).casefold().rstrip(".") for w in wrong}) != 3:
        return "candidates_repeat"
    return None


def shuffle_options(gold: str, wrong: Sequence[str], rng: random.Random) -> tuple[list[str], int]:
    """The four options in random order and the gold's index."""
    options = [_clean(gold), *(_clean(w) for w in wrong)]
    order = list(range(4))
    rng.shuffle(order)
    return [options[i] for i in order], order.index(0)


def build_mcnc(request: dict[str, Any], negatives: Sequence[str], seed: int) -> dict[str, Any]:
    rng = random.Random(stable_seed(seed, "mcnc-options", request["sample_id"]))
    options, gold = shuffle_options(request["true_event"], negatives, rng)
    keep = ("sample_id", "task", "ce_id", "split", "category", "cut_idx", "t_cut", "background", "target_idx")
    return {
        **{k: request[k] for k in keep},
        "question": "Which of these events will happen?",
        "choices": options,
        "gold_index": gold,
        "gold_texts": [options[gold]],
    }


def build_vqa(mcnc: dict[str, Any], seed: int) -> dict[str, Any]:
    """The yes/no question of one kept MCNC question."""
    rng = random.Random(stable_seed(seed, "vqa", mcnc["sample_id"]))
    positive = rng.random() < 0.5
    wrong = [c for i, c in enumerate(mcnc["choices"]) if i != mcnc["gold_index"]]
    candidate = mcnc["choices"][mcnc["gold_index"]] if positive else rng.choice(wrong)
    return {
        **{
            k: mcnc[k] for k in ("ce_id", "split", "category", "cut_idx", "t_cut", "background", "target_idx")
        },
        "sample_id": stable_id("openforecast", "vqa", mcnc["sample_id"]),
        "task": "vqa",
        "question": f"Will this event happen? {candidate}",
        "candidate": candidate,
        "choices": ["Yes", "No"],
        "gold_index": 0 if positive else 1,
        "gold_texts": ["Yes" if positive else "No"],
        "mcnc_sample_id": mcnc["sample_id"],
    }


def build_argument_pair(
    request: dict[str, Any], parsed: dict[str, Any], seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The AQA (open) and MCAC (4 options) questions of one generation."""
    keep = ("ce_id", "split", "category", "cut_idx", "t_cut", "background", "target_idx", "argument")
    common = {k: request[k] for k in keep} | {"question": parsed["question"]}
    aqa = {**common, "sample_id": request["sample_id"], "task": "aqa", "gold_texts": [parsed["true_answer"]]}
    rng = random.Random(stable_seed(seed, "mcac-options", request["sample_id"]))
    options, gold = shuffle_options(parsed["true_answer"], parsed["wrong_answers"], rng)
    mcac = {
        **common,
        "sample_id": stable_id("openforecast", "mcac", request["sample_id"]),
        "task": "mcac",
        "choices": options,
        "gold_index": gold,
        "gold_texts": [options[gold]],
    }
    return aqa, mcac


def check_sample_time(sample: dict[str, Any], tl: CETimeline) -> None:
    """Assert a question's temporal contract against its CE: the background is exactly
    ``e[:cut_idx]`` and lies before ``t_cut``; every target is at or after the cut. Raises
    TemporalLeakError (or AssertionError for a malformed background)."""
    k, t_cut, periods = sample["cut_idx"], sample["t_cut"], tl.periods
    what = f"{sample['task']} {sample['sample_id']}"
    if list(sample["background"]) != [e.text for e in tl.events[:k]]:
        raise AssertionError(f"{what}: the background is not the {k} events before the cut")
    if min(sample["target_idx"]) < k:
        raise AssertionError(f"{what}: a target precedes the cut")
    assert_before_cut(periods[:k], t_cut, what)
    assert_not_before_cut([periods[i] for i in sample["target_idx"]], t_cut, what)
