"""The example builder of docs/writing_a_builder.md (tests only): a question per dated headline."""

from tests.example_builder.build import BUILDER, run

__all__ = ["BUILDER", "run"]
