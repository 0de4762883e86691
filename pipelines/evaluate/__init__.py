"""The evaluation harness (issue 8): time-constrained retrieval, LLM forecasters on every
benchmark's evaluation items, metrics, drift and the leaderboard. Entry point:
``python -m pipelines.evaluate`` (see ``pipelines.evaluate.run``)."""
