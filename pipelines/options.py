"""The options every pipeline entry point shares, with one meaning everywhere.

``--root`` the root URI; ``--force`` redo the requested work and send its LLM requests again
(instead of reading their cached answers; cached answers of other work are kept); ``--plan``
print the requests and token estimates of each stage and write nothing; ``--seed`` the global
seed of every draw, sample and shuffle; ``--limit N`` at most N of the entry point's units (a
question, a day, a complex event, a TCE; for the evaluation, items per benchmark and task);
``--max-new-tokens`` (LLM group) caps every generated answer. An entry point's ``Config``
derives from ``RunOptions`` (a builder's from ``BuildOptions``, which adds the ``--quality-*``
thresholds; ``StageOptions`` when it has no seeded work or units) and adds
its own ``udfs.cli.option`` fields (a ``__post_init__`` of its own calls ``super().__post_init__()``
first, so the Python API checks ranges and choices too); ``main`` gives it its command line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.llm.config import LLMConfig, llm_option
from udfs.cli import check_options, nested, option, run_cli
from udfs.quality import QualityOptions


@dataclass(frozen=True)
class StageOptions:
    """Root, model and the two run modes."""

    root: str = option(help="root URI holding corpus/ and every output (a path, file:// or s3://)")
    llm: LLMConfig = llm_option()
    force: bool = option(
        False,
        help="redo the requested work and send its LLM requests again instead of reading their "
        "cached answers (answers of other work stay cached)",
    )
    plan: bool = option(False, help="print the LLM requests and token estimates per stage; write nothing")

    def __post_init__(self) -> None:
        """Choices and ranges of every option; subclasses with rules of their own call this first."""
        check_options(self)


@dataclass(frozen=True)
class RunOptions(StageOptions):
    """``StageOptions`` plus the seed and the unit limit."""

    seed: int = option(0, help="global seed of every draw, sample and shuffle")
    limit: int | None = option(
        None,
        help="at most N units (questions, days, complex events or TCEs; evaluation: items per "
        "benchmark and task), taken in a fixed order",
        min=1,
    )


@dataclass(frozen=True)
class BuildOptions(RunOptions):
    """``RunOptions`` of a benchmark builder, plus the thresholds of its quality gate."""

    quality: QualityOptions = nested(QualityOptions, title="quality gate (every item, before it is written)")


def main(
    module: str,
    config_cls: type,
    run: Callable[[Any], Any],
    doc: str | None,
    argv: Sequence[str] | None = None,
    presets: dict[str, tuple[str, dict[str, Any]]] | None = None,
) -> Any:
    """The command line of ``python -m <module>``: parse into ``config_cls`` and run."""
    return run_cli(config_cls, run, f"python -m {module}", doc, argv, presets)
