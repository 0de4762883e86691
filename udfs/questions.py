"""Resolved binary forecasting questions from outside sources, in one table.

Importers: ForecastBench (a question set joined with its resolution set) and a plain JSONL or
Parquet file with the same columns. PROPHET builds on these questions and the evaluation harness
scores forecasters on them.

ForecastBench notes: dataset questions carry ``{resolution_date}`` / ``{forecast_due_date}``
placeholders and one resolution per horizon, so each (question, resolution date) pair becomes
its own binary question; market questions resolve once (the earliest resolved row is kept).
Only rows with ``resolved == true`` and an outcome of exactly 0 or 1 are kept; combined
questions are skipped. Ids are unique per platform only, so questions and resolutions join on
(source, id). A question's id is ``<id>[@<resolution date>]``, prefixed ``<platform>:`` when the
same id comes from two platforms in one set. ``freeze_datetime`` is the information cutoff.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import posixpath
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from udfs import storage

UTC_TS = pa.timestamp("us", tz="UTC")

QUESTIONS_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # forecastbench:<platform>, or the file's own
        pa.field("question", pa.string(), nullable=False),
        pa.field("background", pa.string()),
        pa.field("resolution_criteria", pa.string()),
        pa.field("resolution_date", pa.date32(), nullable=False),  # D: evidence must predate it
        pa.field("answer", pa.int8(), nullable=False),  # 1 = the event happened
        pa.field("freeze_at", UTC_TS),  # when the question was posed (information cutoff), if known
        pa.field("url", pa.string()),
    ]
)
REQUIRED = ("id", "question", "resolution_date", "answer")


def _date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value)[:10])


def _timestamp(value: Any) -> dt.datetime | None:
    if value in (None, "", "N/A"):
        return None
    if isinstance(value, dt.datetime):
        stamp = value
    else:
        stamp = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return stamp.replace(tzinfo=dt.UTC) if stamp.tzinfo is None else stamp.astimezone(dt.UTC)


def _text(value: Any) -> str | None:
    if value is None or value == "N/A":
        return None
    text = str(value).strip()
    return text or None


def forecastbench_questions(
    question_set: str | os.PathLike, resolution_set: str | os.PathLike
) -> tuple[pa.Table, dict[str, int]]:
    """The resolved binary questions of a ForecastBench question set, and counts of what was
    skipped and why. Both files are paths or URIs (``file://``, ``s3://``)."""
    qs = storage.read_json(os.fspath(question_set))
    rs = storage.read_json(os.fspath(resolution_set))
    due = qs.get("forecast_due_date")
    resolutions: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rs["resolutions"]:
        if isinstance(row["id"], str):  # ids are unique per source only
            resolutions.setdefault((row["source"], row["id"]), []).append(row)
    skipped = {"combined_question": 0, "no_resolution": 0, "unresolved_or_not_binary": 0}
    rows = []
    for q in qs["questions"]:
        if not isinstance(q["id"], str) or q.get("combination_of") not in (None, "N/A"):
            skipped["combined_question"] += 1
            continue
        found = [r for r in resolutions.get((q["source"], q["id"]), []) if r.get("direction") is None]
        if not found:
            skipped["no_resolution"] += 1
            continue
        usable = sorted(
            (r for r in found if r["resolved"] and r["resolved_to"] in (0.0, 1.0)),
            key=lambda r: r["resolution_date"],
        )
        skipped["unresolved_or_not_binary"] += len(found) - len(usable)
        horizons = q.get("resolution_dates")
        if not isinstance(horizons, list):  # a market: it resolves once
            skipped["unresolved_or_not_binary"] += max(0, len(usable) - 1)
            usable = usable[:1]
        for r in usable:
            question = q["question"].replace("{resolution_date}", r["resolution_date"])
            question = question.replace("{forecast_due_date}", due or "{forecast_due_date}")
            rows.append(
                {
                    "question_id": f"{q['id']}@{r['resolution_date']}"
                    if isinstance(horizons, list)
                    else q["id"],
                    "source": f"forecastbench:{q['source']}",
                    "question": question.strip(),
                    "background": _text(q.get("background")),
                    "resolution_criteria": _text(q.get("resolution_criteria")),
                    "resolution_date": _date(r["resolution_date"]),
                    "answer": int(r["resolved_to"]),
                    "freeze_at": _timestamp(q.get("freeze_datetime")),
                    "url": _text(q.get("url")),
                }
            )
    return pa.Table.from_pylist(_disambiguate(rows), schema=QUESTIONS_SCHEMA), skipped


def _disambiguate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prefix with the platform the ids that more than one platform uses, so ids stay unique."""
    platforms: dict[str, set[str]] = {}
    for row in rows:
        platforms.setdefault(row["question_id"], set()).add(row["source"])
    return [
        {**row, "question_id": f"{row['source'].removeprefix('forecastbench:')}:{row['question_id']}"}
        if len(platforms[row["question_id"]]) > 1
        else row
        for row in rows
    ]


def records_questions(records: Iterable[dict[str, Any]], default_source: str) -> pa.Table:
    """Questions from plain records (JSONL lines or Parquet rows) with at least
    ``id, question, resolution_date, answer``; ``answer`` must be 0 or 1."""
    rows = []
    for n, rec in enumerate(records, start=1):
        missing = [k for k in REQUIRED if rec.get(k) in (None, "")]
        if missing:
            raise ValueError(f"record {n}: missing {missing}")
        if rec["answer"] not in (0, 1, True, False, 0.0, 1.0):
            raise ValueError(f"record {n}: answer must be 0 or 1, got {rec['answer']!r}")
        rows.append(
            {
                "question_id": str(rec["id"]),
                "source": str(rec.get("source") or default_source),
                "question": str(rec["question"]).strip(),
                "background": _text(rec.get("background")),
                "resolution_criteria": _text(rec.get("resolution_criteria")),
                "resolution_date": _date(rec["resolution_date"]),
                "answer": int(rec["answer"]),
                "freeze_at": _timestamp(rec.get("freeze_at")),
                "url": _text(rec.get("url")),
            }
        )
    ids = [r["question_id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("question ids repeat")
    return pa.Table.from_pylist(rows, schema=QUESTIONS_SCHEMA)


def load_questions_file(path: str) -> pa.Table:
    """A JSONL (``.jsonl``/``.json`` lines) or Parquet file of questions, local or S3; the file's
    name without its extension is the ``source`` of rows that name none."""
    name = path.lower()
    default_source = posixpath.splitext(posixpath.basename(storage.normalize_uri(path)))[0]
    if name.endswith(".parquet"):
        table = pq.read_table(storage.open_input(path))
        return records_questions(table.to_pylist(), default_source)
    lines = storage.read_bytes(path).decode("utf-8").splitlines()
    return records_questions((json.loads(line) for line in lines if line.strip()), default_source)
