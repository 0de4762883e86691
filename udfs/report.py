"""The summary every job and stage ends with: rows read, written, rejected by reason, time.

Counts must reconcile (read = written + rejected, unless a job says otherwise in ``notes``);
``reconciles`` says whether they do, and the summary is written next to the outputs as JSON.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


@dataclass
class RunSummary:
    """Counters of one job or stage run."""

    name: str
    rows_read: int = 0
    rows_written: int = 0
    rejected: Counter = field(default_factory=Counter)
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    def reject(self, reason: str, n: int = 1) -> None:
        self.rejected[reason] += n

    @property
    def rows_rejected(self) -> int:
        return sum(self.rejected.values())

    @property
    def reconciles(self) -> bool:
        return self.rows_read == self.rows_written + self.rows_rejected

    def finish(self) -> RunSummary:
        self.finished_at = time.time()
        return self

    @property
    def seconds(self) -> float:
        return (self.finished_at or time.time()) - self.started_at

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rows_read": self.rows_read,
            "rows_written": self.rows_written,
            "rows_rejected": self.rows_rejected,
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "reconciles": self.reconciles,
            "metrics": self.metrics,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }

    def table(self) -> str:
        """A fixed-width text table for the console."""
        rows: list[tuple[str, str]] = [
            ("rows read", f"{self.rows_read:,}"),
            ("rows written", f"{self.rows_written:,}"),
            ("rows rejected", f"{self.rows_rejected:,}"),
        ]
        rows += [(f"  rejected: {reason}", f"{n:,}") for reason, n in sorted(self.rejected.items())]
        rows += [(str(k), _fmt(v)) for k, v in self.metrics.items()]
        rows.append(("counts reconcile", "yes" if self.reconciles else "NO"))
        rows.append(("time", f"{self.seconds:.1f} s"))
        width = max(len(k) for k, _ in rows)
        vwidth = max(len(v) for _, v in rows)
        rule = "-" * (width + vwidth + 5)
        lines = [rule, f" {self.name}", rule]
        lines += [f" {k.ljust(width)}   {v.rjust(vwidth)}" for k, v in rows]
        lines += [f" note: {n}" for n in self.notes]
        lines.append(rule)
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def parse_failures(summary: RunSummary) -> int:
    """Rows of an LLM stage whose answer did not parse (reasons ``parse: …``)."""
    return sum(n for reason, n in summary.rejected.items() if reason.startswith("parse:"))


def combined_table(summaries: list[RunSummary], title: str) -> str:
    """One line per stage: read / written / rejected (of which parse failures, for LLM stages) /
    time, for multi-stage pipelines; with LLM stages, a last line of the requests computed and the
    engines started (model loads) in the run."""
    header = ("stage", "read", "written", "rejected", "parse fail", "ok", "seconds")
    body = [
        (
            s.name,
            f"{s.rows_read:,}",
            f"{s.rows_written:,}",
            f"{s.rows_rejected:,}",
            f"{parse_failures(s):,}" if "requests_total" in s.metrics else "",
            "yes" if s.reconciles else "NO",
            f"{s.seconds:.1f}",
        )
        for s in summaries
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )

    rule = "-" * len(fmt(header))
    llm = [s for s in summaries if "requests_total" in s.metrics]
    footer = [
        f"LLM requests computed: {sum(s.metrics.get('requests_computed', 0) for s in llm):,}; "
        f"engine starts: {sum(s.metrics.get('engine_starts', 0) for s in llm)} (each loads the model once)"
    ]
    return "\n".join([title, rule, fmt(header), rule, *map(fmt, body), rule, *(footer if llm else [])])


def quiet_model_loading() -> None:
    """No transformers progress bars (a model's weights loading) where stderr is no terminal: in
    a job's log or a Ray worker's, a bar is a line at every redraw."""
    if not sys.stderr.isatty():
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


class Progress:
    """Work done out of ``total``: a tqdm bar on a terminal; in a log (stderr is no terminal) one
    line at every tenth of the work, naming ``desc``, with the rate and the time left, instead of
    a bar redrawn many times."""

    def __init__(self, desc: str, total: int, log: logging.Logger, unit: str = "items"):
        self.desc, self.total, self.log, self.unit, self.done = desc, total, log, unit, 0
        self.bar = tqdm(desc=desc, total=total, unit=unit) if sys.stderr.isatty() else None
        self.logged = 0  # tenths logged
        self.started = time.monotonic()

    def update(self, n: int = 1) -> None:
        if not n:
            return
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        tenths = 10 * self.done // max(1, self.total)
        if tenths > self.logged:
            self.logged = tenths
            rate = self.done / max(time.monotonic() - self.started, 1e-9)
            left = max(0, self.total - self.done) / rate
            self.log.info(
                "%s: %d/%d %s (%d%%), %s/s, ETA %s",
                self.desc,
                self.done,
                self.total,
                self.unit,
                100 * self.done // max(1, self.total),
                f"{rate:.3g}",
                duration(left),
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def duration(seconds: float) -> str:
    """A time span for people: ``42 s``, ``3 min 20 s``, ``2 h 05 min``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def log_to_stderr() -> None:
    """Make ``augury.*`` loggers print INFO records whatever was done to the root logger (Ray,
    a library, or nobody configured it): their level is INFO, and they get a handler of their own
    on stderr unless a root handler already prints INFO records (pytest's, a ``basicConfig``'s);
    with their own, they no longer pass records on to the root's handlers, so no line is printed
    twice."""
    augury = logging.getLogger("augury")
    augury.setLevel(logging.INFO)
    if any(h.level <= logging.INFO for h in logging.getLogger().handlers):
        return
    if not any(getattr(h, "augury", False) for h in augury.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.augury = True  # type: ignore[attr-defined]
        augury.addHandler(handler)
        augury.propagate = False


def progress(items: Sequence[T], desc: str, log: logging.Logger) -> Iterator[T]:
    """``items`` with a ``Progress`` of one step each."""
    bar = Progress(desc, len(items), log)
    try:
        for item in items:
            yield item
            bar.update()
    finally:
        bar.close()
