"""Pure functions of the OpenForecast builder (``pipelines.openforecast``): page filters, WCEP
aggregation and document lookup, timeline parsing and merge rules, structured events, dates and
cut times, question sampling per task, the MCNC leak filter and splits. No Spark, Ray or vLLM."""
