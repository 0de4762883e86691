"""The static HTML report of a root's benchmarks and evaluation (``python -m pipelines.report``)."""
