"""``python -m pipelines.report --root ROOT [--out DIR]``: write the HTML report, print its index."""

from __future__ import annotations

from collections.abc import Sequence

import pipelines.report.run as report_run
from udfs.cli import run_cli


def main(argv: Sequence[str] | None = None) -> str:
    return run_cli(report_run.Config, report_run.run, "python -m pipelines.report", report_run.__doc__, argv)


if __name__ == "__main__":
    main()
