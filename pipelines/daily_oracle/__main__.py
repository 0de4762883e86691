"""Build Daily Oracle questions day by day.

    python -m pipelines.daily_oracle --root out                          # every corpus day >= 3 days old
    python -m pipelines.daily_oracle --root out --date 2022-09-18        # one day (skipped if built)
    python -m pipelines.daily_oracle --root out --from 2022-09-15 --to 2022-09-18 --plan
    python -m pipelines.daily_oracle --root s3://bucket/augury --backend vllm --model meta-llama/...

A day already built is skipped (no LLM request); adding a day of news builds just that day.
A day is left unbuilt (built again by the next run) when one of its requests ended with an engine
error or the corpus has no article of it. --force rebuilds the requested days and sends their LLM
requests again (the other days' cached answers are kept); --limit N builds the N oldest pending
days; --plan prints the requests a run would send and writes nothing.
"""

from pipelines.daily_oracle.build import run
from pipelines.daily_oracle.config import Config
from pipelines.options import main

if __name__ == "__main__":
    main("pipelines.daily_oracle", Config, run, __doc__)
