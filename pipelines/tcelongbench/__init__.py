"""TCELongBench builder (``python -m pipelines.tcelongbench``); see ``build.py``."""

from pipelines.builders import Result
from pipelines.tcelongbench.build import BUILDER, run
from pipelines.tcelongbench.config import Config

__all__ = ["BUILDER", "Config", "Result", "run"]
