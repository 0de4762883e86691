# Two commands set up and run everything on a fresh machine:
#   make demo   build the virtualenv, run the corpus jobs and builders on ../shared/data, print where outputs are
#   make test   build the virtualenv, run the whole default test tier (the 25 slowest tests listed at the end)
#   make test-fast  the tests that start no Spark, Ray, model or S3 server (an edit loop of a few minutes)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED ?= $(abspath ../shared/data)
OUT ?= $(abspath out)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export AUGURY_SHARED_DATA := $(SHARED)
TEST_WORKERS ?= 2
FAST := not (spark or ray or llm or s3 or cluster or integration or vllm)

.PHONY: demo test test-fast lint bench venv browser clean

venv: $(VENV)/.installed

# torch first, pinned: the CPU build lies on local disk; an unpinned torch would pull a CUDA build.
$(VENV)/.installed: pyproject.toml constraints.txt
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[local,dev]'
	touch $@

demo: venv
	./demo.sh "$(SHARED)" "$(OUT)"

# The report's browser test drives Debian's headless Chromium; installed when missing.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }

# The default tier: every test but the vllm, integration and cluster tiers (pyproject's addopts;
# .ci/run runs the cluster tier after this). The tier markers come from the fixtures a test uses
# (tests/conftest.py). Files run on TEST_WORKERS pytest-xdist workers (whole files, heaviest
# first); inputs built once per run (the sample corpus, the toy index) are shared between them.
test: venv browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 tests

test-fast: venv
	$(PY) -m pytest -q --durations=10 -m '$(FAST)' tests

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: venv
	$(PY) -m bench.ingest_news
	$(PY) -m bench.ingest_wikipedia
	$(PY) -m bench.llm_local
	$(PY) -m bench.cil_cost

clean:
	rm -rf $(VENV) out .pytest_cache
