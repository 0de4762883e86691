"""Build PROPHET from the articles under a root and a set of resolved binary questions.

    python -m pipelines.prophet --root out --forecastbench QSET.json RESOLUTIONS.json   # paper defaults
    python -m pipelines.prophet --root out --questions questions.jsonl --estimator logprob
    python -m pipelines.prophet ... --plan            # LLM requests per question; runs nothing
    python -m pipelines.prophet ... --evidence-only   # then --plan gives exact CIL request counts

The root must hold corpus/articles (jobs.ingest_news) and its article index (python -m
pipelines.index --root ROOT), which the evidence search goes through. The demo (ForecastBench questions,
logprob estimator, small N and K_max) is in docs/prophet.md.
"""

from __future__ import annotations

from pipelines.options import main
from pipelines.prophet.build import run
from pipelines.prophet.config import Config

if __name__ == "__main__":
    main("pipelines.prophet", Config, run, __doc__)
