"""The PROPHET builder: news evidence per resolved binary question, Causal Intervened Likelihood
per article, and the inferable (L1) / not inferable (L2) split. See ``pipelines.prophet.build``."""
