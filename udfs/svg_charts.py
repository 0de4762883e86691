"""Small charts as inline SVG for the static report: stacked share bars, intervals, lines.

Each function returns one ``<svg>`` element as text, sized in pixels, with a ``<title>`` on every
mark so a reader hovering a bar sees its exact count. Text is escaped; nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

KEPT = "#3a8d5c"
REJECTED = ("#d9822b", "#c0392b", "#8e44ad", "#b7950b", "#7f8c8d", "#a04000", "#6c3483", "#1f618d")
SERIES = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
FONT = 'font-family="sans-serif" font-size="12"'


@dataclass(frozen=True)
class Segment:
    label: str
    n: int
    color: str


@dataclass(frozen=True)
class Bar:
    """One horizontal bar: its label, a note printed after it and its segments."""

    label: str
    note: str
    segments: Sequence[Segment]


def reason_colors(reasons: Sequence[str]) -> dict[str, str]:
    """One colour per rejection reason, stable for a given sorted set of reasons."""
    return {r: REJECTED[i % len(REJECTED)] for i, r in enumerate(sorted(set(reasons)))}


def share_bars(bars: Sequence[Bar], width: int = 720, label_width: int = 230) -> str:
    """Each bar is 100 % of its own rows, split into its segments (a step's units differ from the
    next step's, so lengths are shares, and the counts are written beside them)."""
    row, plot = 26, width - label_width - 150
    height = row * len(bars) + 8
    parts = [_open(width, height)]
    for i, bar in enumerate(bars):
        y = 4 + i * row
        parts.append(f'<text x="0" y="{y + 15}" {FONT}>{escape(_clip(bar.label, 34))}</text>')
        total = sum(s.n for s in bar.segments)
        x = float(label_width)
        for seg in bar.segments:
            if not seg.n:
                continue
            w = plot * seg.n / total
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(w, 1.0):.1f}" height="{row - 6}" fill="{seg.color}">'
                f"<title>{escape(seg.label)}: {seg.n:,}</title></rect>"
            )
            if w > 36:
                parts.append(f'<text x="{x + 4:.1f}" y="{y + 15}" fill="#fff" {FONT}>{seg.n:,}</text>')
            x += w
        if not total:
            parts.append(f'<rect x="{label_width}" y="{y}" width="{plot}" height="{row - 6}" fill="#eee"/>')
        parts.append(
            f'<text x="{label_width + plot + 8}" y="{y + 15}" {FONT}>{escape(_clip(bar.note, 24))}</text>'
        )
    return "".join([*parts, "</svg>"])


@dataclass(frozen=True)
class Interval:
    label: str
    value: float
    low: float | None
    high: float | None


def intervals(rows: Sequence[Interval], lo: float = 0.0, hi: float = 1.0, width: int = 640) -> str:
    """A dot per row at its value and a whisker over its interval, on one axis from ``lo`` to
    ``hi`` (values outside are clamped to the axis)."""
    label_width, row = 260, 22
    plot = width - label_width - 20
    height = row * len(rows) + 30
    scale = _scaler(lo, hi, label_width, plot)
    parts = [_open(width, height)]
    for tick in (lo, (lo + hi) / 2, hi):
        x = scale(tick)
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 18}" stroke="#ddd"/>')
        parts.append(f'<text x="{x:.1f}" y="{height - 4}" text-anchor="middle" {FONT}>{tick:g}</text>')
    for i, r in enumerate(rows):
        y = 12 + i * row
        parts.append(f'<text x="0" y="{y + 4}" {FONT}>{escape(_clip(r.label, 40))}</text>')
        if r.low is not None and r.high is not None:
            parts.append(
                f'<line x1="{scale(r.low):.1f}" y1="{y}" x2="{scale(r.high):.1f}" y2="{y}" '
                f'stroke="#555" stroke-width="2"/>'
            )
        interval = f" [{r.low:.3f}, {r.high:.3f}]" if r.low is not None and r.high is not None else ""
        parts.append(
            f'<circle cx="{scale(r.value):.1f}" cy="{y}" r="4" fill="{SERIES[0]}">'
            f"<title>{escape(r.label)}: {r.value:.3f}{interval}</title></circle>"
        )
    return "".join([*parts, "</svg>"])


def lines(
    series: dict[str, list[tuple[str, float | None]]], lo: float = 0.0, hi: float = 1.0, width: int = 640
) -> str:
    """One line per named series over shared x labels (e.g. months), y from ``lo`` to ``hi``;
    a missing value leaves its point out; a legend below."""
    xs = sorted({x for points in series.values() for x, _ in points})
    left, top, plot_h = 40, 10, 180
    plot_w = width - left - 20
    height = top + plot_h + 30 + 16 * len(series)
    step = plot_w / max(1, len(xs) - 1)
    x_of = {x: left + (i * step if len(xs) > 1 else plot_w / 2) for i, x in enumerate(xs)}
    y_of = _scaler(hi, lo, top, plot_h)
    parts = [_open(width, height)]
    for tick in (lo, (lo + hi) / 2, hi):
        y = y_of(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{tick:g}</text>')
    every = max(1, len(xs) // 8)
    for i, x in enumerate(xs):
        if i % every == 0:
            parts.append(
                f'<text x="{x_of[x]:.1f}" y="{top + plot_h + 16}" text-anchor="middle" {FONT}>{escape(x)}</text>'
            )
    for k, (name, points) in enumerate(sorted(series.items())):
        color = SERIES[k % len(SERIES)]
        known = [(x, v) for x, v in sorted(points) if v is not None]
        if len(known) > 1:
            coords = " ".join(f"{x_of[x]:.1f},{y_of(_clamp(v, lo, hi)):.1f}" for x, v in known)
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, v in known:
            parts.append(
                f'<circle cx="{x_of[x]:.1f}" cy="{y_of(_clamp(v, lo, hi)):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)} {escape(x)}: {v:.3f}</title></circle>"
            )
        y = top + plot_h + 34 + 16 * k
        parts.append(f'<rect x="{left}" y="{y - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{left + 16}" y="{y}" {FONT}>{escape(name)}</text>')
    return "".join([*parts, "</svg>"])


def _open(width: int, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">'
    )


def _scaler(lo: float, hi: float, start: float, length: float):
    span = (hi - lo) or 1.0

    def scale(v: float) -> float:
        return start + length * (_clamp(v, min(lo, hi), max(lo, hi)) - lo) / span

    return scale


def _clamp(v: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, v))


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
