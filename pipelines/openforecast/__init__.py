"""OpenForecast (COLING 2025): complex events from Wikipedia and the Current Events Portal,
timelines by extraction-then-complement, and six forecasting tasks. See docs/openforecast.md."""

from pipelines.builders import Result
from pipelines.openforecast.build import BUILDER, run
from pipelines.openforecast.config import Config, demo_config

__all__ = ["BUILDER", "Config", "Result", "demo_config", "run"]
