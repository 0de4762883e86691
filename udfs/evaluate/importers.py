"""Evaluation items from outside sources, in the shared item schema (``udfs.eval_items``).

- **Resolved binary questions** (ForecastBench, or a plain question file, both read by
  ``udfs.questions``) become ``binary_prob`` items: ``t_cut`` = the question's freeze time
  (ForecastBench ``freeze_datetime``), ``t_resolve`` = its resolution date. A question without a
  freeze time has no known information cutoff and is skipped with a reason.
- **ForecastQA** public JSON (spec §8): a dict with ``yesno_questions`` and
  ``multichoice_questions``; yes/no items carry ``id, question, answer, time_constraint`` (both
  seen in a listing of the real train file: Hypogenic-AI/news-future-ai-codex,
  ``logs/resource_finder_codex_transcript.jsonl``). MC items additionally ``choices`` — our
  assumption, found nowhere public: a list of the 4 option texts, ``answer`` being one of them.
  ``t_cut`` = ``time_constraint`` (a date means 00:00 UTC).
  The importer fails on any unknown key, on a missing answer, on an MC item without exactly 4
  distinct options including the answer, on a cutoff outside [2019-01-01, 2019-11-22], and — for
  a complete public split — on counts that differ from the paper's Table 2.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa

from udfs.eval_items import YES_NO, items_table
from udfs.timeutil import to_utc

FORECASTQA = "forecastqa"
FORECASTQA_COUNTS = {  # paper Table 2
    "train": {"yesno": 4737, "mc": 3473},
    "dev": {"yesno": 582, "mc": 508},
    "test": {"yesno": 584, "mc": 508},
}
FORECASTQA_RANGE = (dt.date(2019, 1, 1), dt.date(2019, 11, 22))
_FQA_LISTS = {"yesno_questions": "yesno", "multichoice_questions": "mc"}
_FQA_KEYS = {
    "yesno": {"id", "question", "answer", "time_constraint"},
    "mc": {"id", "question", "answer", "time_constraint", "choices"},
}
_FQA_FILE = re.compile(r"forecastQA_(train|dev|test)_public\.json$")


class ForecastQAFormatError(ValueError):
    """The file does not have the layout the importer asserts."""


def _cutoff(value: Any, where: str) -> dt.datetime:
    if not isinstance(value, str) or not value.strip():
        raise ForecastQAFormatError(f"{where}: time_constraint must be a date string, got {value!r}")
    try:
        text = value.strip()
        parsed = (
            dt.date.fromisoformat(text)
            if len(text) == 10
            else dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        )
    except ValueError as exc:
        raise ForecastQAFormatError(f"{where}: unreadable time_constraint {value!r}") from exc
    stamp = to_utc(parsed)
    low, high = FORECASTQA_RANGE
    if not to_utc(low) <= stamp <= to_utc(high):
        raise ForecastQAFormatError(f"{where}: time_constraint {value} outside {low}..{high}")
    return stamp


def _yesno_gold(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return 0 if value else 1
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return 0 if value.strip().lower() == "yes" else 1
    raise ForecastQAFormatError(f"{where}: yes/no answer must be yes or no, got {value!r}")


def forecastqa_items(data: Any, split: str, check_counts: bool) -> list[dict[str, Any]]:
    """Items of one ForecastQA split (see the module docstring for what is asserted)."""
    if not isinstance(data, dict):
        raise ForecastQAFormatError("top level must be an object")
    unknown = set(data) - set(_FQA_LISTS)
    missing = set(_FQA_LISTS) - set(data)
    if unknown or missing:
        raise ForecastQAFormatError(f"top-level keys: unknown {sorted(unknown)}, missing {sorted(missing)}")
    items: list[dict[str, Any]] = []
    for list_key, kind in _FQA_LISTS.items():
        if not isinstance(data[list_key], list):
            raise ForecastQAFormatError(f"{list_key} must be a list")
        for n, raw in enumerate(data[list_key]):
            where = f"{list_key}[{n}]"
            if not isinstance(raw, dict):
                raise ForecastQAFormatError(f"{where}: not an object")
            keys = set(raw)
            if keys != _FQA_KEYS[kind]:
                raise ForecastQAFormatError(
                    f"{where}: unknown keys {sorted(keys - _FQA_KEYS[kind])}, missing "
                    f"{sorted(_FQA_KEYS[kind] - keys)} (expected {sorted(_FQA_KEYS[kind])}; "
                    "docs/evaluate.md says which keys are verified)"
                )
            question = raw["question"]
            if not isinstance(question, str) or not question.strip():
                raise ForecastQAFormatError(f"{where}: empty question")
            if raw["answer"] in (None, ""):
                raise ForecastQAFormatError(f"{where}: no answer (withheld answers cannot be scored)")
            item = {
                "item_id": f"{split}-{kind}-{raw['id']}",
                "benchmark": FORECASTQA,
                "task": kind,
                "split": split,
                "type": kind,
                "question": question.strip(),
                "t_cut": _cutoff(raw["time_constraint"], where),
                "source_id": str(raw["id"]),
            }
            if kind == "yesno":
                item.update(choices=YES_NO, gold_index=_yesno_gold(raw["answer"], where))
            else:
                choices = raw["choices"]
                if (
                    not isinstance(choices, list)
                    or len(choices) != 4
                    or not all(isinstance(c, str) and c.strip() for c in choices)
                    or len({c.strip() for c in choices}) != 4
                ):
                    raise ForecastQAFormatError(f"{where}: MC items need exactly 4 distinct option texts")
                options = [c.strip() for c in choices]
                answer = str(raw["answer"]).strip()
                if answer not in options:
                    raise ForecastQAFormatError(f"{where}: answer {answer!r} is not one of the options")
                item.update(choices=options, gold_index=options.index(answer))
            items.append(item)
    if check_counts:
        counts = {kind: sum(i["task"] == kind for i in items) for kind in ("yesno", "mc")}
        if counts != FORECASTQA_COUNTS[split]:
            raise ForecastQAFormatError(
                f"{split} counts {counts} differ from Table 2 {FORECASTQA_COUNTS[split]}"
            )
    return items


def load_forecastqa(path: str, data: bytes, split: str | None = None) -> pa.Table:
    """A ForecastQA file as an item table. A file named ``forecastQA_<split>_public.json`` is a
    complete public split, so its counts are checked against Table 2; any other file needs
    ``split`` and is not count-checked."""
    name = PurePosixPath(path).name
    public = _FQA_FILE.search(name)
    if split is None:
        if not public:
            raise ForecastQAFormatError(
                f"{name}: give the split of a file not named forecastQA_<split>_public.json"
            )
        split = public.group(1)
    if split not in FORECASTQA_COUNTS:
        raise ForecastQAFormatError(f"unknown split {split!r}")
    try:
        parsed = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ForecastQAFormatError(f"{name}: not JSON ({exc.msg})") from exc
    return items_table(forecastqa_items(parsed, split, check_counts=bool(public)))


def question_items(questions: pa.Table, benchmark: str) -> tuple[pa.Table, dict[str, int]]:
    """``binary_prob`` items from a ``udfs.questions`` table; questions without a freeze time are
    skipped and counted (their information cutoff is unknown)."""
    items, skipped = [], {"no_freeze_time": 0}
    for q in questions.to_pylist():
        if q["freeze_at"] is None:
            skipped["no_freeze_time"] += 1
            continue
        background = [
            x
            for x in (
                q["background"],
                q["resolution_criteria"] and f"Resolution criteria: {q['resolution_criteria']}",
            )
            if x
        ]
        items.append(
            {
                "item_id": q["question_id"],
                "benchmark": benchmark,
                "task": "binary",
                "split": "test",
                "type": "binary_prob",
                "question": q["question"],
                "background": background,
                "choices": YES_NO,
                "gold_value": float(q["answer"]),
                "t_cut": q["freeze_at"],
                "t_resolve": to_utc(q["resolution_date"]),
                "category": q["source"],
                "source_id": q["question_id"],
            }
        )
    return items_table(items), skipped
