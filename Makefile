# The two commands of the README: `make demo` and `make test`. Both set the machine up first.
# Then `make lab`: a sandbox and JupyterLab on the workshop notebooks, until Ctrl-C.
SHELL := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup system venv labextension lab lint typecheck test test-fast demo clean help slurm-root test-slurm

help:
	@echo "make demo   set up this machine, start the Slurm sandbox and run the main job"
	@echo "make test   set up this machine, lint, type-check and run every test"
	@echo "make lab    set up, start the sandbox and JupyterLab on the workshop notebooks; Ctrl-C stops both"
	@echo "            (SLURMLAB_PROFILE=h200-mig, SLURMLAB_LAB_IP=0.0.0.0, SLURMLAB_LAB_PORT=8899 change it)"
	@echo "make test-slurm SLURM=24.11|26.05   the sandbox tests, notebooks and demo on another Slurm (root)"

setup: system venv labextension

# Debian packages (Slurm, munge, chromium ...): idempotent, quick when present.
system:
	@bash scripts/setup-system.sh

venv: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml scripts/setup-venv.sh
	@bash scripts/setup-venv.sh $(PYTHON) $(VENV)
	@touch $@

# The JupyterLab extension, built with the machine's node/npm (skipped where there is none).
labextension: venv
	@bash scripts/build-labextension.sh $(PY)

lint: venv
	$(VENV)/bin/ruff check slurmlab tests benchmarks scripts

typecheck: venv
	$(VENV)/bin/mypy

test: setup lint typecheck
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

# the fast tier: no Slurm, no browser, both cores (pytest-xdist); HYPOTHESIS_PROFILE=dev
test-fast: venv
	$(PY) -m pytest -p no:cacheprovider -n 2 --dist worksteal -m "not sandbox and not browser" $(PYTEST_ARGS)

demo: setup
	$(PY) -m slurmlab.demo

# A sandbox and JupyterLab (127.0.0.1 unless SLURMLAB_LAB_IP says otherwise) on a working copy of the notebooks
# (build/lab); prints the URL with its token; Ctrl-C stops JupyterLab, its kernels and the sandbox.
lab: setup
	@$(PY) scripts/lab.py $(LAB_ARGS)

# The Slurm version matrix: a Debian root per Slurm version (scripts/slurm-root.sh, cached in
# ${SLURMLAB_ROOTS:-~/.cache/slurmlab/roots}), entered with chroot (scripts/in-slurm-root.sh). Needs root.
SLURM ?=
SLURM_PYTEST ?= -m "sandbox and not browser"
slurm-root:
	@[[ -n "$(SLURM)" ]] || { echo "which Slurm? make $@ SLURM=24.11 (or 26.05)" >&2; exit 2; }
	@bash scripts/slurm-root.sh $(SLURM)

# The sandbox-marked tests (the notebooks among them), then the demo; each run must leave nothing running.
test-slurm: slurm-root
	@start=$$SECONDS; bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider \
	    $(SLURM_PYTEST) $(PYTEST_ARGS); rc=$$?; \
	  echo "test-slurm $(SLURM): pytest exit $$rc in $$((SECONDS - start))s"; \
	  start=$$SECONDS; bash scripts/in-slurm-root.sh $(SLURM) python -m slurmlab.demo; demo=$$?; \
	  echo "test-slurm $(SLURM): demo exit $$demo in $$((SECONDS - start))s"; \
	  [[ $$rc -eq 0 && $$demo -eq 0 ]]

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
