"""Pure parts of the evaluation harness: item importers, answer parsing, per-item scoring and
the leaderboard's aggregation (metric formulas live in ``udfs.metrics``)."""
