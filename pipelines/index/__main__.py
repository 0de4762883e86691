"""Build or update the article index: ``python -m pipelines.index --root ROOT``."""

from pipelines.index.build import run
from pipelines.index.config import Config
from udfs.cli import run_cli


def main(argv: list[str] | None = None) -> None:
    run_cli(
        Config,
        run,
        "python -m pipelines.index",
        "Build or update ROOT/index/articles (LanceDB) from corpus/articles.",
        argv,
    )


if __name__ == "__main__":
    main()
