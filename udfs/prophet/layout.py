"""Prompt variables of the CIL terms in the two layouts, and which prompt file serves which term.

- ``listed`` (default, prefix-cache friendly): every window article in one fixed order (oldest
  first) as numbered reports, then — for a conditional — the focal report, the question and the
  task, and only at the end the scenario: one short "[j] happened / did not happen" line per
  report. All requests of a bin share everything up to the scenario, so an engine's prefix
  cache computes the long parts once per bin (per article for the focal part).
- ``grouped`` (the paper's layout, prompts (e)/(f)): the window articles split under "these
  events happened" and "these events did not happen", the focal article under "most
  importantly", then the question and the instructions. Each assignment reorders the article
  texts, so little is shared between requests.

Both layouts carry the same content. Identical terms render to byte-identical prompts (the
stage runner computes them once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from udfs.prophet.plan import ConditionalTerm, JointTerm

LAYOUTS = ("listed", "grouped")
ESTIMATORS = ("verbalized", "logprob")


@dataclass(frozen=True)
class PromptArticle:
    """An article as the CIL prompts show it: its publication date and a short text."""

    date: str
    text: str


def snippet(title: str | None, text: str, words: int) -> str:
    """The title followed by the first ``words`` words of the text, on one line."""
    body = " ".join((text or "").split()[:words])
    head = " ".join((title or "").split())
    if head and body.startswith(head):
        return body
    return f"{head}. {body}" if head and body else head or body


def prompt_ids(estimator: str, layout: str) -> tuple[str, str]:
    """(joint prompt id, conditional prompt id) for an estimator and a layout."""
    if estimator not in ESTIMATORS or layout not in LAYOUTS:
        raise ValueError(f"estimator must be one of {ESTIMATORS} and layout one of {LAYOUTS}")
    suffix = ("_grouped" if layout == "grouped" else "") + ("_yesno" if estimator == "logprob" else "")
    return f"prophet.joint{suffix}", f"prophet.conditional{suffix}"


def _window(term: JointTerm | ConditionalTerm, articles: Mapping[str, PromptArticle], layout: str):
    shown = [articles[i] for i in term.window_ids]
    if layout == "listed":
        return {
            "window": [{"label": str(j + 1), "date": a.date, "text": a.text} for j, a in enumerate(shown)],
            "scenario": [{"label": str(j + 1), "happened": b == "1"} for j, b in enumerate(term.bits)],
        }
    return {
        "happened": [
            {"date": a.date, "text": a.text} for a, b in zip(shown, term.bits, strict=True) if b == "1"
        ],
        "not_happened": [
            {"date": a.date, "text": a.text} for a, b in zip(shown, term.bits, strict=True) if b == "0"
        ],
    }


def joint_variables(term: JointTerm, articles: Mapping[str, PromptArticle], layout: str) -> dict[str, Any]:
    """Variables of a joint prompt: the window under one assignment."""
    return _window(term, articles, layout)


def conditional_variables(
    term: ConditionalTerm, articles: Mapping[str, PromptArticle], question: str, layout: str
) -> dict[str, Any]:
    """Variables of a conditional prompt: the window under one assignment, the focal article
    marked happened (x = 1) or did not happen (x = 0), and the question."""
    focal = articles[term.article_id]
    return {
        **_window(term, articles, layout),
        "focal": {"date": focal.date, "text": focal.text},
        "focal_happened": term.x == 1,
        "question": question,
    }
