"""The PROPHET builder: news evidence per resolved binary question, Causal Intervened Likelihood
per article, and the inferable (L1) / not inferable (L2) split. See ``pipelines.prophet.build``."""

from pipelines.builders import Result
from pipelines.prophet.build import BUILDER, run
from pipelines.prophet.config import Config

__all__ = ["BUILDER", "Config", "Result", "run"]
