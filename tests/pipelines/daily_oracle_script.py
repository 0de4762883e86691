"""The Daily Oracle scripted tests' script: well-formed answers for every stage with a few planted
faults, the run's Config, and the helpers that read a root's files, shards and request keys."""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.daily_oracle import Config
from pipelines.daily_oracle.stages import STAGES
from pipelines.llm.config import LLMConfig
from pipelines.llm.render import RequestRenderer
from udfs import storage
from udfs.daily_oracle.parsing import FILTER_HEADINGS

D15, D16, D18 = dt.date(2022, 9, 15), dt.date(2022, 9, 16), dt.date(2022, 9, 18)
PUBLISHERS = ("npr.org", "chicago.suntimes.com", "abc7.com")  # the sample's English hosts


# ------------------------------------------------------------------ the script
def _line(text: str, chars: int, drop: str = "") -> str:
    """One line of at most ``chars`` characters starting with a letter or digit, without the
    characters in ``drop`` (the declared answer forms)."""
    for c in drop:
        text = text.replace(c, " ")
    text = " ".join(text.split())
    return re.sub(r"^[^A-Za-z0-9]+", "", text)[:chars].strip()


def _first_sentence(text: str) -> str:
    return _line(re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0], 160)


def summary(v):
    if "Queen" in v["article"][:400]:
        return " A look back at the late Queen's long reign.\nKeypoint: No new event reported."
    return f" {_line(v['article'], 200, ':')}\nKeypoint: {_first_sentence(v['article'])}"


def qa(v):
    month, topic = v["month_year"], " ".join(re.sub(r"[?():]|\.(?=\.)", " ", v["keypoint"]).split()[:5])
    second = "Yes." if "refinery" in v["article"].lower() else "No."  # Indiana refinery: outside the form
    return (
        f" Will officials confirm that {topic} by {month}?\nAnswer 1: Yes.\n"
        f"Question 2: Will officials deny that {topic} in {month}?\nAnswer 2: {second}\n"
        f"Question 3: Who will speak publicly about {topic} in {month}?\nAnswer 3: 'The mayor'\n"
        f"Question 4: How many people will be affected by {topic} by {month}?\nAnswer 4: Twelve."
    )


def distractors(v):
    count = "Twelve" if "Puerto Rico" in v["article"] else "Three"  # equals the answer once
    return (
        "\n(b) 'The governor'\n(c) 'A federal judge'\n(d) 'The police chief'\n"
        f"Noising Answers 2:\n(b) {count}.\n(c) Five.\n(d) Twenty."
    )


def judge(v):
    blocks = []
    for k in range(1, 5):
        points = [2] * 7
        if k == 2:
            points[5] = 1  # 13: kept
        if k == 3 and "migrants" in v["article"]:
            points[1] = points[2] = 1  # 12: rejected
        lines = [] if k == 1 else [f"*Question {k}*"]
        for heading, point in zip(FILTER_HEADINGS, points, strict=True):
            lines += [f"## {heading}", "- Reasoning: meets the criterion.", f"- Point: {point}"]
        blocks.append("\n".join(lines))
    return "\n" + "\n".join(blocks)


def category(v):
    return "Politics & Governance" if "officials" in v["question"] else {"Sports": 0.2, "Other": 0.8}


SCRIPT = {
    "daily_oracle.summary": summary,
    "daily_oracle.qa": qa,
    "daily_oracle.distractors": distractors,
    "daily_oracle.filter": judge,
    "daily_oracle.category": category,
}


def config(root: str, *days: dt.date, **kw) -> Config:
    llm = LLMConfig(backend="scripted", script=SCRIPT)
    return Config(root=root, dates=days, publishers=PUBLISHERS, llm=llm, **kw)


def day_files(root: str, day: dt.date) -> dict[str, bytes]:
    found = {}
    for table in ("selection", "tf_questions", "mc_questions", "rejected"):
        for f in storage.list_files(storage.join(root, "benchmarks", "daily_oracle", table, f"date={day}")):
            found[f] = storage.read_bytes(f)
    return found


def shard_files(root: str) -> dict[str, bytes]:
    """Every response shard (the request cache) of every stage."""
    files = storage.list_files(storage.join(root, "daily_oracle"), ".parquet")
    return {f: storage.read_bytes(f) for f in files if "/responses/" in f}


class FailingRenderer(RequestRenderer):
    """The stage runner's renderer, except that the requests of stage ``stage_name`` whose prompt
    contains ``marker`` go out under a prompt id the script lacks: the engine answers them with
    an error. (It runs in Ray workers: its settings are instance fields.)"""

    def __init__(self, *args: Any, stage_name: str, marker: str, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.stage_name, self.marker = stage_name, marker

    def units(self, out, i, record):
        first = len(out.requests["prompt_id"])
        super().units(out, i, record)
        if self.stage.name == self.stage_name:
            ids, texts = out.requests["prompt_id"], out.requests["prompt_text"]
            for n in range(first, len(ids)):
                if self.marker in texts[n]:
                    ids[n] = "unscripted"


def engine_error_for(stage_name: str, marker: str) -> functools.partial:
    """The renderer to patch over ``pipelines.llm.stage.RequestRenderer`` (``FailingRenderer``)."""
    return functools.partial(FailingRenderer, stage_name=stage_name, marker=marker)


def no_engine(*args, **kwargs):
    pytest.fail("the run reached the engine")


def request_keys(files: dict[str, bytes]) -> set[str]:
    """The request keys answered in the given response shards."""
    return {
        k for data in files.values() for k in pq.read_table(pa.BufferReader(data))["request_key"].to_pylist()
    }


def output_keys(root: str) -> set[str]:
    """The request keys of every stage's output rows (the last run's)."""
    return {
        k
        for name in STAGES
        for k in storage.read_table(storage.join(root, "daily_oracle", name, "output"))[
            "request_key"
        ].to_pylist()
    }
