"""spark-submit entry points of the corpus layer: one module per job, each a Config and a run()."""
