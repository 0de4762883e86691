"""``python -m pipelines.audit --root ROOT``: exit 0 when clean, 1 on any violation, 2 on
unusable inputs."""

from __future__ import annotations

from collections.abc import Sequence

import pipelines.audit.run as audit_run
from udfs.cli import run_cli


def main(argv: Sequence[str] | None = None) -> int:
    """Run the audit; the exit status is 1 when it found any violation."""
    report = run_cli(audit_run.Config, audit_run.run, "python -m pipelines.audit", audit_run.__doc__, argv)
    return 1 if report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
