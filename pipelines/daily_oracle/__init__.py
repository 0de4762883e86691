"""Daily Oracle builder (``python -m pipelines.daily_oracle``); see ``build`` and docs/daily_oracle.md."""

from pipelines.builders import Result
from pipelines.daily_oracle.build import BUILDER, run
from pipelines.daily_oracle.config import Config

__all__ = ["BUILDER", "Config", "Result", "run"]
