"""Daily Oracle builder (``python -m pipelines.daily_oracle``); see ``build`` and docs/daily_oracle.md."""

from pipelines.daily_oracle.build import Result, run
from pipelines.daily_oracle.config import Config

__all__ = ["Config", "Result", "run"]
