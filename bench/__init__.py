"""Benchmarks: each prints a ratio against a baseline measured in the same run, then one JSON line.

What the corpus benches measure beside wall time lives here.
"""

from __future__ import annotations

import os
from typing import Any

import psutil


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and every process below it (Spark's JVM, its
    Python workers, and the workers they already reaped), so that other work on the machine,
    which stretches wall time, can be told apart from a method's own cost."""
    total = 0.0
    me = psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def figures(what: str, count: int, seconds: float, cpu: float, cores: int) -> dict[str, Any]:
    """A method's figures: ``count`` of ``what`` (articles, pages) in ``seconds`` on ``cores``
    cores using ``cpu`` CPU seconds; per core = count / (seconds × cores); the 1-minute load
    average beside them, since other work on the machine stretches wall time."""
    return {
        what: count,
        "seconds": round(seconds, 2),
        "cores": cores,
        "per_core": count / (seconds * cores),
        "cpu_seconds": round(cpu, 2),
        "per_cpu_second": count / cpu,
        "load": os.getloadavg()[0],
    }
