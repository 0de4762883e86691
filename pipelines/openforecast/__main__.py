"""Build the OpenForecast benchmark.

python -m pipelines.openforecast --root out --demo                     # small, embedded model
python -m pipelines.openforecast --root out --test-start 2026-03-01    # all data, newer corpora
python -m pipelines.openforecast --root s3://bucket/augury --backend vllm --model meta-llama/...
"""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.openforecast.build import run
from pipelines.openforecast.config import PRESETS, Config
from pipelines.options import main
from udfs.cli import parse

MODULE = "pipelines.openforecast"


def parse_args(argv: Sequence[str] | None = None) -> Config:
    """The Config of a command line (without running it)."""
    return parse(Config, argv, f"python -m {MODULE}", __doc__, PRESETS)


if __name__ == "__main__":
    main(MODULE, Config, run, __doc__, presets=PRESETS)
