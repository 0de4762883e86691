# Two commands set up and run everything on a fresh machine:
#   make demo   build the virtualenv, run the corpus jobs and builders on ../shared/data, print where outputs are
#   make test   build the virtualenv, run the whole test suite (the 25 slowest tests listed at the end)
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

.PHONY: demo test lint bench venv browser clean

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

test: venv browser
	$(PY) -m pytest -q --durations=25 tests

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
