"""Starting Ray: attach to a cluster when one is there (``ray job submit``), else start locally."""

from __future__ import annotations

import logging
import os
import sys
import warnings

from pipelines.llm.config import LLMConfig

FOOTER_ACTORS = "RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"


def ensure_ray(cfg: LLMConfig) -> None:
    """Initialise Ray once per process. Locally, logical CPUs default to at least 4 so the
    engine actor does not starve Ray Data's read and write tasks on a 2-core machine, and Parquet
    footers are read by one actor per logical CPU rather than Ray Data's 32. Ray Data's
    progress bars are turned off unless both stdout and stderr are a terminal: otherwise Ray writes
    a progress report of several lines every ten seconds per dataset into the job's log."""
    import ray
    import ray.data

    if not (sys.stdout.isatty() and sys.stderr.isatty()):  # Ray picks the report by stdout
        ray.data.DataContext.get_current().enable_progress_bars = False
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"], logging_level=logging.WARNING)
        return
    cpus = cfg.ray_num_cpus or max(4, os.cpu_count() or 1)
    # Ray Data's Parquet reader starts 32 footer-reading actors for every read, each a worker
    # process: on one machine that halved a small index run's speed (32 s against 16 s) and held
    # 8 GB; one per logical CPU reads the footers as fast (the user's own setting wins)
    os.environ.setdefault(FOOTER_ACTORS, str(cpus))
    with warnings.catch_warnings():
        # Ray starts its processes by fork and exec; a driver that has opened LanceDB already
        # would have each forked child warn that LanceDB's runtime was reset for it (five such
        # warnings in the log), though the child runs no LanceDB code before its exec
        warnings.filterwarnings("ignore", "lancedb fork support is experimental", RuntimeWarning)
        ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
