"""Pure functions on one record or one batch: parsing, filtering, prompt rendering and parsing,
CIL math, metrics and Arrow schemas. Nothing in this package imports Spark, Ray or vLLM."""
