"""Ray job entry points (builders, evaluation) and the LLM stage machinery they share."""
