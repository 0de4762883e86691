"""Scripted answers for the scale bench: every prompt id the builders and the evaluation send,
answered in its declared form for any variables (``pipelines.llm.scripted``).

The answers are generic, not clever: they are built from the words of the prompt's own
variables (the synthetic corpus has no sentences, so text is cut into runs of words, never split
at full stops) and from a hash of the variables where a number or a choice is needed, so a run
is deterministic and every stage gets well-formed rows to work on. A builder's LLM work is then
the same whatever the corpus size: what the bench varies is the reading around it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from udfs.daily_oracle.parsing import FILTER_HEADINGS

Variables = dict[str, Any]
Script = dict[str, Callable[[Variables], Any]]

DATED = re.compile(r"^(\d{4}-\d{2}-\d{2}):\s*")
ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
PLACEHOLDERS = ("entit", "event", "query", "step")  # PROPHET's query form refuses these words


def unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from the given values."""
    digest = hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()
    return int(digest[:13], 16) / 16**13


def words(text: Any, n: int, longest: int = 15, digits: bool = True) -> list[str]:
    """The first ``n`` words of ``text`` without punctuation, none longer than ``longest``."""
    found = re.sub(r"[^\w\s]", " ", str(text or "")).split()
    kept = [w for w in found if len(w) <= longest and (digits or not re.search(r"\d", w))]
    return kept[:n] or ["unknown"]


def phrase(text: Any, n: int, digits: bool = True) -> str:
    return " ".join(words(text, n, digits=digits))


def runs(text: Any, n: int, count: int) -> list[str]:
    """Up to ``count`` consecutive runs of ``n`` words, each ending in a full stop."""
    found = words(text, n * count, digits=False)
    return [" ".join(found[i : i + n]) + "." for i in range(0, len(found), n)][:count]


def numbered(items: list[str]) -> str:
    """A numbered list as the model continues it after the prompt's "1." prefix."""
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))[len("1.") :]


def items_of(rendered: Any) -> list[str]:
    """The items of a rendered numbered list."""
    lines = str(rendered or "").splitlines()
    return [re.sub(r"^\d+\.\s*", "", line).strip() for line in lines if line.strip()]


def first_date(*texts: Any, default: str = "2022-06-15") -> str:
    for text in texts:
        found = ISO_DATE.search(str(text or ""))
        if found:
            return found.group(1)
    return default


# ----------------------------------------------------------------------------- Daily Oracle
def _do_summary(v: Variables) -> str:
    return f" {phrase(v['article'], 30)}\nKeypoint: {phrase(v['article'], 12)}."


def _do_qa(v: Variables) -> str:
    topic, month = phrase(v["keypoint"], 5), v["month_year"]
    return (
        f" Will officials confirm that {topic} by {month}?\nAnswer 1: Yes.\n"
        f"Question 2: Will officials deny that {topic} in {month}?\nAnswer 2: No.\n"
        f"Question 3: Who will speak publicly about {topic} in {month}?\nAnswer 3: 'The mayor'\n"
        f"Question 4: How many people will be affected by {topic} by {month}?\nAnswer 4: Twelve."
    )


def _do_filter(v: Variables) -> str:
    blocks = []
    for k in range(1, 5):
        lines = [] if k == 1 else [f"*Question {k}*"]
        for heading in FILTER_HEADINGS:
            lines += [f"## {heading}", "- Reasoning: meets the criterion.", "- Point: 2"]
        blocks.append("\n".join(lines))
    return "\n" + "\n".join(blocks)


DAILY_ORACLE: Script = {
    "daily_oracle.summary": _do_summary,
    "daily_oracle.qa": _do_qa,
    "daily_oracle.distractors": lambda v: (
        "\n(b) 'The governor'\n(c) 'A federal judge'\n(d) 'The police chief'\n"
        "Noising Answers 2:\n(b) Three.\n(c) Five.\n(d) Twenty."
    ),
    "daily_oracle.filter": _do_filter,
    "daily_oracle.category": lambda v: "Other",
}


# ----------------------------------------------------------------------------- OpenForecast
def _news_items(v: Variables) -> list[str]:
    """Three events per document: one dated the document's day, two undated."""
    topic = phrase(v["title"], 6)
    return [
        f"{v['date']}: {phrase(v['article'], 12)}.",
        f"Officials respond to {topic}.",
        f"Observers follow {topic}.",
    ]


def _wiki_items(v: Variables) -> list[str]:
    """Five events ten days apart, from the first date the page names."""
    start = dt.date.fromisoformat(first_date(v["article"]))
    topic = phrase(v["title"], 6)
    return [f"{start + dt.timedelta(days=10 * i)}: {topic} stage {i}." for i in range(5)]


def _event_struct(v: Variables) -> str:
    day = DATED.match(v["event"])
    found = words(DATED.sub("", v["event"]), 8, longest=12, digits=False)
    event = {
        "type": "statement",
        "trigger": found[min(1, len(found) - 1)],
        "time": day.group(1) if day else None,
        "location": f"Region {found[-1]}",
        "subject": " ".join(found[:2]),
        "object": " ".join(found[-3:]),
        "extra": {},
    }
    return " " + json.dumps([event])


def _negatives(v: Variables) -> str:
    day = DATED.match(v["true_event"])
    prefix = f"{day.group(1)}: " if day else ""
    body = phrase(DATED.sub("", v["true_event"]), 12)
    return f" {prefix}It is denied that {body}\nB: {prefix}Observers abroad claim that {body}\nC: {prefix}Nothing follows {body}"


def _mcac(v: Variables) -> str:
    found = words(DATED.sub("", v["target_event"]), 14)
    return (
        f" What is the {phrase(v['argument_name'], 3)} of this event: {' '.join(found[2:]) or 'it'}?\n"
        f"True answer: {' '.join(found[:2])}\nWrong answer A: Someone else\n"
        "Wrong answer B: Nobody at all\nWrong answer C: A third party"
    )


def _event_time(v: Variables) -> str:
    day = DATED.match(v["event"])
    return " " + (day.group(1) if day else "Unknown")


OPENFORECAST: Script = {
    "openforecast.page_category": lambda v: "Event",
    "openforecast.page_date": lambda v: " " + first_date(v["article"]),
    "openforecast.page_heading": lambda v: "Politics and elections",
    "openforecast.extract_wiki": lambda v: numbered(_wiki_items(v)),
    "openforecast.extract_news": lambda v: numbered(_news_items(v)),
    "openforecast.complement": lambda v: numbered(items_of(v["timeline"]) + _news_items(v)),
    "openforecast.merge": lambda v: numbered(
        list(dict.fromkeys(items_of(v["first"]) + items_of(v["second"])))
    ),
    "openforecast.adjust": lambda v: numbered(items_of(v["timeline"])),
    "openforecast.event_time": _event_time,
    "openforecast.event_struct": _event_struct,
    "openforecast.mcnc_negatives": _negatives,
    "openforecast.mcac_question": _mcac,
}


# ----------------------------------------------------------------------------- PROPHET
def _queries(v: Variables) -> str:
    """Two queries of two words of the question (the form's closing part: the prompt opens it)."""
    found = [
        w
        for w in words(v["question"], 40, longest=12, digits=False)
        if w.isalpha() and not w.lower().startswith(PLACEHOLDERS)
    ][1:5]
    found += ["news", "report", "talks", "vote"][len(found) :]
    return f'{found[0]} {found[1]}", "{found[2]} {found[3]}"]'


def _p(v: Variables, kind: str) -> float:
    return round(0.05 + 0.9 * unit(kind, v), 2)


PROPHET: Script = {
    "prophet.query_entities": _queries,
    "prophet.query_steps": _queries,
    "prophet.query_similar": _queries,
    "prophet.relevance": lambda v: (
        f"Thoughts: about the question.\nRating: {2 + int(unit('r', v['article']) * 5)}"
    ),
    "prophet.relevance_score": lambda v: {str(2 + int(unit("r", v["article"]) * 5)): 1.0},
    **{
        f"prophet.{kind}_yesno": (lambda v, kind=kind: {"Yes": _p(v, kind), "No": 1 - _p(v, kind)})
        for kind in ("joint", "conditional", "joint_grouped", "conditional_grouped")
    },
    **{
        f"prophet.{kind}": (lambda v, kind=kind: f"Weighing the reports. *{_p(v, kind):.2f}*")
        for kind in ("joint", "conditional", "joint_grouped", "conditional_grouped")
    },
}


# ----------------------------------------------------------------------------- TCELongBench
TCELONGBENCH: Script = {
    "tcelongbench.article_summary": lambda v: " " + " ".join(runs(v["text"], 12, 3)),
    "tcelongbench.day_summary": lambda v: " " + " ".join(runs(" ".join(v["summaries"]), 12, 4)),
    "tcelongbench.key_points": lambda v: " " + "\n* ".join(runs(v["summary"], 8, 4)),
    "tcelongbench.detail_qa": lambda v: (
        f" What happened when {phrase(v['point'], 9, digits=False)}? Answer: {phrase(v['point'], 4, digits=False)}"
    ),
    "tcelongbench.forecast_qa": lambda v: (
        f" What will follow once {phrase(v['point'], 9, digits=False)} after {v['day']}?"
        f" Answer: {phrase(v['point'], 4, digits=False)}"
    ),
    "tcelongbench.evidence": lambda v: f" is correct. {runs(v['article'], 20, 1)[0]}",
    "tcelongbench.distractors": lambda v: (
        " A delay announced by the city council\n(c) A protest by farmers in the north\n"
        "(d) A new trade agreement with Japan"
    ),
    "tcelongbench.forecast_check": lambda v: " A. Q2: B",
    "tcelongbench.order_check": lambda v: " A. Q2: A",
    "tcelongbench.entities": lambda v: "\nDATE: Monday\nGPE: Lisbon",
}


# ----------------------------------------------------------------------------- evaluation
def _labels(v: Variables) -> list[str]:
    return [c["label"] for c in v.get("choices") or []] or ["Yes", "No"]


def _choice(v: Variables) -> dict[str, float]:
    """The first option gets 0.6, the rest share 0.4."""
    labels = _labels(v)
    rest = 0.4 / (len(labels) - 1)
    return {label: 0.6 if i == 0 else rest for i, label in enumerate(labels)}


EVALUATE: Script = {
    "evaluate.forecast_choice": _choice,
    "evaluate.forecast_verbalized": lambda v: ", ".join(f'"{k}": {p:.3f}' for k, p in _choice(v).items()),
    "evaluate.forecast_order": lambda v: " " + ",".join(_labels(v)),
    "evaluate.forecast_events": lambda v: (
        " Officials meet to discuss the matter\n2. Talks end without a deal"
    ),
    "evaluate.forecast_answer": lambda v: " The government",
    "evaluate.judge_match": lambda v: " No",
    "evaluate.judge_evidence": lambda v: "No",
    "evaluate.judge_answer": lambda v: "No",
}

SCRIPTS: dict[str, Script] = {
    "openforecast": OPENFORECAST,
    "daily_oracle": DAILY_ORACLE,
    "prophet": PROPHET,
    "tcelongbench": TCELONGBENCH,
    "evaluate": EVALUATE,
}
