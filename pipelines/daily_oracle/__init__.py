"""Daily Oracle builder (``python -m pipelines.daily_oracle``); see ``pipeline`` and docs/daily_oracle.md."""

from pipelines.daily_oracle.pipeline import Config, Result, run

__all__ = ["Config", "Result", "run"]
