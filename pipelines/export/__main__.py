"""``python -m pipelines.export --root ROOT --benchmark NAME --to DIR``: write a Hub-ready folder."""

from __future__ import annotations

from collections.abc import Sequence

import pipelines.export.run as export_run
from udfs.cli import run_cli


def main(argv: Sequence[str] | None = None):
    return run_cli(export_run.Config, export_run.run, "python -m pipelines.export", export_run.__doc__, argv)


if __name__ == "__main__":
    main()
