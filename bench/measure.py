"""What the corpus benches measure beside wall time."""

from __future__ import annotations

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
