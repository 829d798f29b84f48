# One command sets everything up and runs the main job; one sets up and runs the tests.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
CORE   := $(VENV)/.installed-core
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow lint docs bench setup clean

setup: $(STAMP)

# torch first, pinned to the CPU build (a looser pin pulls several GB of CUDA wheels), then the
# package alone: what the demo needs.
$(CORE): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.*"
	$(PY) -m pip install -q -e .
	@touch $(CORE)

# every extra on top, so that the [llm], Ray, docs and example tests run instead of skipping
$(STAMP): $(CORE)
	$(PY) -m pip install -q -e ".[all]"
	@touch $(STAMP)

demo: $(CORE)
	HF_HUB_OFFLINE=1 $(VENV)/bin/taskextrap reproduce parameter --profile quick

# Two pytest workers (pytest-xdist): the tests run one torch thread each, so a 2-core machine
# runs two at once (worksteal: an idle worker takes queued tests from a busy one, so the long
# end-to-end tests never leave the other idle). TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= 2
# The end-to-end checks marked slow (whole tiny runs of several experiments, two-process and Ray
# runs, fresh interpreters loading saved models, the strict docs build, exhaustive prompt audits)
# are left to `make test-slow`, which CI runs too, so `make test` stays under 5 minutes on 2 cores.
XDIST = -n $(TEST_WORKERS) $(if $(filter 0,$(TEST_WORKERS)),,--dist worksteal)
test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m "not slow" $(XDIST)

test-slow: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -m slow $(XDIST)

# ruff (lint and format) on the package, tests, benchmarks, scripts and the docs build's hook;
# mypy on the package (pyproject.toml's [tool.mypy]). .pre-commit-config.yaml runs the same.
LINT_PATHS := src tests benchmarks scripts examples docs/hooks.py docs/tutorial.py
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

# The documentation site (mkdocs-material + mkdocstrings) into site/; the tests build it too.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) runs site
