"""What the OpenForecast steps hand each other: the complex events, their timelines round by
round with one provenance row per round, the described atomic events and the questions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from udfs.openforecast.questions import CETimeline


@dataclass
class State:
    """``ces``: every complex event with its split and documents; ``timelines``: the live ones'
    atomic events (a CE drops out when its timeline does); ``rounds``: the ``timeline_rounds``
    rows, ``complement_rounds`` how many rounds ran; ``described``: each atomic event's
    timestamp and structured events by (CE, index); ``final``: the finished timelines;
    ``samples``: the questions by task."""

    ces: list[dict[str, Any]] = field(default_factory=list)
    timelines: dict[str, list[str]] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    complement_rounds: int = 0
    described: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    final: dict[str, CETimeline] = field(default_factory=dict)
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
