"""Checks of what a forecaster may see, on rows already read: the audit of ``python -m
pipelines.audit`` (``docs/audit.md``). No I/O here; the driver reads items, stored results,
native tables and article dates and hands them in.

Each check tallies, per violation kind, how many things it looked at, how many broke the rule
and a few examples, so a clean report also shows that something was checked.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from udfs.index_docs import article_of
from udfs.timeutil import to_utc

# kind → what a violation of it means (the report's row titles, in this order)
KINDS: dict[str, str] = {
    "missing_t_cut": "item without a t_cut",
    "after_cutoff": "context article at or after the item's t_cut",
    "date_mismatch": "stored retrieved date differs from the article's",
    "gold_in_context": "gold article in a context",
    "undated": "undated article in a context",
    "missing": "context id not in corpus/articles",
    "split_overlap": "the same event in two splits",
    "answer_in_question": "answer stated verbatim in the question",
}
EXAMPLES = 5  # examples kept per kind
MIN_ANSWER_WORDS, MIN_ANSWER_CHARS = 2, 4  # shorter answers are not searched for in the question
_EDGES = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(frozen=True)
class EventKey:
    """What one event of a benchmark is, and where to find it: the native tables (under
    ``benchmarks/<name>/``) whose ``id_column`` holds an item's ``source_id`` and whose
    ``key_column`` names the item's event. Each builder declares its own
    (``pipelines.builders.Builder.event``)."""

    event: str
    tables: tuple[str, ...]
    id_column: str
    key_column: str


@dataclass
class Tally:
    """One kind's counts: things checked, violations, the first few examples."""

    checked: int = 0
    violations: int = 0
    examples: list[dict[str, str]] = field(default_factory=list)

    def check(self, ok: bool, example: str, detail: str) -> None:
        self.checked += 1
        if not ok:
            self.violations += 1
            if len(self.examples) < EXAMPLES:
                self.examples.append({"id": example, "detail": detail})


@dataclass
class BenchmarkAudit:
    """The audit of one benchmark: a tally per kind (kinds in ``skipped`` were not run)."""

    name: str
    items: int = 0
    results: int = 0
    tallies: dict[str, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    skipped: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return sum(t.violations for t in self.tallies.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "results": self.results,
            "violations": self.violations,
            "kinds": {
                kind: {"checked": None, "skipped": True}
                if kind in self.skipped
                else {"checked": t.checked, "violations": t.violations, "examples": t.examples}
                for kind, t in self.tallies.items()
            },
            "notes": self.notes,
        }


@dataclass(frozen=True)
class Reference:
    """One id an item may be shown: from its fixed context or from a stored retrieval result."""

    example: str  # the id the report names (item id, or result row)
    doc_id: str  # an article id, or a passage id of the index's passage tables
    t_cut: dt.datetime | None
    gold: frozenset[str]
    stored_date: dt.datetime | None = None
    has_stored_date: bool = False
    exempt: bool = False  # gold-context rows show gold articles on purpose


def check_cutoffs(items: Iterable[dict[str, Any]], audit: BenchmarkAudit) -> None:
    """Every item needs its information cutoff (the schema forbids a null one)."""
    tally = audit.tallies["missing_t_cut"]
    for item in items:
        tally.check(item.get("t_cut") is not None, item["item_id"], "t_cut is null")


def item_references(items: Iterable[dict[str, Any]]) -> list[Reference]:
    """The fixed context of each item (``context_article_ids``)."""
    return [
        Reference(item["item_id"], doc, item.get("t_cut"), frozenset(item.get("gold_article_ids") or []))
        for item in items
        for doc in item.get("context_article_ids") or []
    ]


def is_gold_context(row: dict[str, Any]) -> bool:
    """A gold-context result (reading comprehension: it shows the gold articles on purpose)."""
    return row.get("mode") == "gold_context" and row.get("forecasting") is False


def result_references(
    results: Iterable[dict[str, Any]], items: Mapping[str, dict[str, Any]]
) -> list[Reference]:
    """The retrieved documents of each stored result, judged against its item's cutoff and gold
    (a result whose item is not in ``items`` against its own ``t_cut``, gold unknown)."""
    refs = []
    for row in results:
        item = items.get(row["item_id"])
        t_cut = item.get("t_cut") if item else row.get("t_cut")
        gold = frozenset((item or {}).get("gold_article_ids") or [])
        example = f"{row['item_id']} ({row.get('model')}, {row.get('setting')})"
        dates = row.get("retrieved_dates") or []
        for n, doc in enumerate(row.get("retrieved_ids") or []):
            stored = dates[n] if n < len(dates) else None  # a date not stored is a mismatch too
            refs.append(Reference(example, doc, t_cut, gold, stored, True, is_gold_context(row)))
    return refs


def referenced_articles(refs: Iterable[Reference]) -> set[str]:
    """The article ids whose publication dates the checks need."""
    return {article_of(r.doc_id) for r in refs}


def check_references(
    refs: Iterable[Reference], dates: Mapping[str, dt.datetime | None], audit: BenchmarkAudit
) -> None:
    """Judge each shown id by its article's own date (``dates``: article id → ``published_at``,
    None when undated; an id absent from it is not in the corpus)."""
    t = audit.tallies
    for ref in refs:
        article = article_of(ref.doc_id)
        t["missing"].check(article in dates, ref.example, f"{ref.doc_id} is not in corpus/articles")
        if article not in dates:
            continue
        published = to_utc(dates[article]) if dates[article] is not None else None
        if ref.has_stored_date:
            stored = to_utc(ref.stored_date) if ref.stored_date is not None else None
            t["date_mismatch"].check(
                stored == published,
                ref.example,
                f"{ref.doc_id} stored {_iso(stored)}, article {_iso(published)}",
            )
        if ref.exempt:
            continue
        t["gold_in_context"].check(article not in ref.gold, ref.example, f"{article} is a gold article")
        t["undated"].check(published is not None, ref.example, f"{article} has no publication date")
        if published is not None and ref.t_cut is not None:
            cut = to_utc(ref.t_cut)
            t["after_cutoff"].check(
                published < cut, ref.example, f"{ref.doc_id} published {_iso(published)}, t_cut {_iso(cut)}"
            )


def _iso(value: dt.datetime | None) -> str:
    return value.isoformat() if value is not None else "none"


def check_splits(
    items: Iterable[dict[str, Any]], keys: Mapping[str, str], event: str, audit: BenchmarkAudit
) -> int:
    """One event (``keys``: source id → event key) must not have items in two splits. Returns
    the number of items whose source id has no event (not checked)."""
    splits: dict[str, set[str]] = defaultdict(set)
    unmapped = 0
    for item in items:
        key = keys.get(item.get("source_id") or "")
        if key is None:
            unmapped += 1
        else:
            splits[key].add(item["split"])
    tally = audit.tallies["split_overlap"]
    for key, found in sorted(splits.items()):
        tally.check(len(found) == 1, key, f"{event} {key} has items in splits {', '.join(sorted(found))}")
    return unmapped


def normalise(text: str) -> str:
    """Lowercase, whitespace collapsed, punctuation stripped at both ends."""
    return _EDGES.sub("", " ".join(text.lower().split()))


def _contains(text: str, phrase: str) -> bool:
    """``phrase`` inside ``text`` as whole words (both normalised)."""
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def _long_enough(answer: str) -> bool:
    return len(answer.split()) >= MIN_ANSWER_WORDS and len(answer) >= MIN_ANSWER_CHARS


def answers_to_find(item: dict[str, Any]) -> list[str] | None:
    """The normalised answers that must not appear in the question; None when the type has no
    answer text (yes/no, binary, ordering). An MC gold choice contained in every choice tells
    nothing and is left out, as are answers under ``MIN_ANSWER_WORDS`` / ``MIN_ANSWER_CHARS``."""
    if item["type"] == "mc":
        choices = [normalise(c) for c in item.get("choices") or []]
        gold = item.get("gold_index")
        if gold is None or not 0 <= gold < len(choices):
            return []
        answers = [choices[gold]] if not all(_contains(c, choices[gold]) for c in choices) else []
    elif item["type"] == "open":
        answers = [normalise(g) for g in item.get("gold_texts") or []]
    else:
        return None
    return [a for a in answers if _long_enough(a)]


def check_answers(items: Iterable[dict[str, Any]], audit: BenchmarkAudit) -> None:
    """No MC or open item states its answer verbatim in its question."""
    tally = audit.tallies["answer_in_question"]
    for item in items:
        answers = answers_to_find(item)
        if answers is None:
            continue
        question = " ".join((item.get("question") or "").lower().split())
        found = [a for a in answers if _contains(question, a)]
        tally.check(not found, item["item_id"], f"question contains the answer {found[0]!r}" if found else "")


def table(audit: BenchmarkAudit) -> str:
    """The console table of one benchmark: a row per kind, checked / violations / an example."""
    header = ("kind", "checked", "violations", "example")
    body = [
        (KINDS[kind], "skipped", "", "")
        if kind in audit.skipped
        else (KINDS[kind], f"{t.checked:,}", f"{t.violations:,}", t.examples[0]["id"] if t.examples else "")
        for kind, t in audit.tallies.items()
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in (1, 2) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    rule = "-" * len(fmt(header))
    title = f"{audit.name}: {audit.items:,} items, {audit.results:,} stored results"
    return "\n".join(
        [title, rule, fmt(header), rule, *map(fmt, body), rule, *(f"note: {n}" for n in audit.notes)]
    )
