"""Pure functions of the TCELongBench builder (``pipelines.tcelongbench``): TCE formation, outline
parsing and filtering, QA parsers and checks, voting rules, order windows, dedup, shuffles and
splits. No Spark, Ray or vLLM imports; see ``docs/tcelongbench.md`` and the spec."""
