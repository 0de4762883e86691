"""TCELongBench builder (``python -m pipelines.tcelongbench``); see ``build.py``."""

from pipelines.tcelongbench.build import Result, run
from pipelines.tcelongbench.config import Config

__all__ = ["Config", "Result", "run"]
