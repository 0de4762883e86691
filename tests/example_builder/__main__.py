"""Build the example benchmark: one yes/no question per dated headline.

python -m tests.example_builder --root out --limit 3
"""

from pipelines.options import main
from tests.example_builder.build import run
from tests.example_builder.config import Config

if __name__ == "__main__":
    main("tests.example_builder", Config, run, __doc__)
