"""TCELongBench builder (``python -m pipelines.tcelongbench``); see ``build.py``."""

from pipelines.tcelongbench.build import Config, Result, run

__all__ = ["Config", "Result", "run"]
