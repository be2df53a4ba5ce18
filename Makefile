# The two commands of the README: `make demo` and `make test`. Both set the machine up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup system venv lab lint typecheck test test-fast demo clean help

help:
	@echo "make demo   set up this machine, start the Slurm sandbox and run the main job"
	@echo "make test   set up this machine, lint, type-check and run every test"

setup: system venv lab

# Debian packages (Slurm, munge, chromium ...): idempotent, quick when present.
system:
	@bash scripts/setup-system.sh

venv: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml scripts/setup-venv.sh
	@bash scripts/setup-venv.sh $(PYTHON) $(VENV)
	@touch $@

# The JupyterLab extension, built with the machine's node/npm (skipped where there is none).
lab: venv
	@bash scripts/build-labextension.sh $(PY)

lint: venv
	$(VENV)/bin/ruff check slurmlab tests benchmarks scripts

typecheck: venv
	$(VENV)/bin/mypy

test: setup lint typecheck
	$(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

test-fast: venv
	$(PY) -m pytest -m "not sandbox and not browser" $(PYTEST_ARGS)

demo: setup
	$(PY) -m slurmlab.demo

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
