"""Build TCELongBench from the articles under a root.

    python -m pipelines.tcelongbench --root out                      # paper defaults, local model
    python -m pipelines.tcelongbench --root out --min-cluster-size 3 --min-samples 2 \\
        --limit 1 --max-articles-per-day 1 --max-article-words 100 --max-new-tokens 32   # a small demo
    python -m pipelines.tcelongbench --root s3://bucket/augury --backend vllm --model meta-llama/...
"""

from pipelines.options import main
from pipelines.tcelongbench.build import run
from pipelines.tcelongbench.config import Config

if __name__ == "__main__":
    main("pipelines.tcelongbench", Config, run, __doc__)
