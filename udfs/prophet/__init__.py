"""Pure functions of the PROPHET builder (``pipelines.prophet``): 10-day binning back from the
resolution date, w-windows and their cap, the Causal Intervened Likelihood (CIL) adjustment sum,
the L1/L2 rule, the planning of the LLM requests CIL needs, their request tables and the term
values read back from the answers, the §6 cost formulas, parsers of the evidence prompts,
evidence selection and its cutoff check, and the block prefix-cache model used by
``bench.cil_cost``. No Spark, Ray or vLLM imports; see ``docs/prophet.md`` and the spec."""
