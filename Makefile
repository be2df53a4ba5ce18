# The two commands of the README: `make demo` and `make test`. Both set the machine up first.
# Then `make lab`: a sandbox and JupyterLab on the workshop notebooks, until Ctrl-C.
SHELL := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup system venv labextension hubproxy hub lab lint typecheck docs test test-fast demo clean help slurm-root test-slurm bench

help:
	@echo "make demo   set up this machine, start the Slurm sandbox, execute the workshop lessons and write them"
	@echo "            as HTML: build/demo/index.html (DEMO_ARGS='--lessons 00,03' for a few; --help for more)"
	@echo "make test   set up this machine, lint, type-check, build the docs and run every test"
	@echo "make docs   the documentation site, from docs/ and the docstrings: build/docs/index.html"
	@echo "make lab    set up, start the sandbox and JupyterLab on the workshop notebooks; Ctrl-C stops both"
	@echo "            (SLURMLAB_PROFILE=h200-mig, SLURMLAB_LAB_IP=0.0.0.0, SLURMLAB_LAB_PORT=8899 change it)"
	@echo "make hub    set up, start the sandbox and a JupyterHub on it (batchspawner): each server a Slurm job;"
	@echo "            Ctrl-C stops the hub, its jobs and the sandbox (HUB_ARGS='--user NAME --port 8000')"
	@echo "make test-slurm SLURM=24.11|26.05   the sandbox and hub tests, the no-Slurm tests (on the root's Python) and the demo on another Slurm (root)"
	@echo "make bench  the scale benchmarks (1,000 nodes, 10,000 jobs) beside their baselines: build/bench.json and"
	@echo "            the README's Performance section (BENCH_ARGS='--only parse' for one module, '--quick' to try)"

setup: system venv labextension hubproxy

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

# configurable-http-proxy, the proxy of `make hub` and the hub tests, from npm (hub/package-lock.json); skipped
# where there is no npm (the hub then says how to install it)
hubproxy: hub/node_modules/.package-lock.json

hub/node_modules/.package-lock.json: hub/package.json hub/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix hub --no-audit --no-fund --loglevel=error; \
	  else echo "setup: no npm here: the hub's configurable-http-proxy is not installed"; fi

lint: venv
	$(VENV)/bin/ruff check slurmlab tests benchmarks scripts docs
	$(VENV)/bin/ruff format --check slurmlab tests benchmarks scripts docs
	@bash scripts/build-labextension.sh $(PY) lint

typecheck: venv
	$(VENV)/bin/mypy

# The documentation site (Sphinx, Markdown pages with MyST; the magics, command-line and API references written
# from the code's own help and docstrings) into build/docs. Every warning fails it (-W; docs/conf.py is nitpicky,
# so a reference that leads nowhere is one); -E reads every page again, since an unchanged page would not repeat
# its warnings. tests/unit/test_project_files.py builds it with a planted broken reference of each kind.
DOCS_OUT ?= build/docs
docs: venv
	$(PY) -m sphinx -b html -E -W --keep-going -q docs $(DOCS_OUT)
	@echo "docs: $(DOCS_OUT)/index.html"

# Every test, in four runs: those that need no Slurm and no browser on both cores (pytest-xdist); the sandbox
# and browser tests on three workers, a test file to a worker (each worker starts the session's sandboxes of its
# own; the tier waits more than it computes: measured with process accounting, two workers used 759 CPU-s of the
# 1,556 core-s of their 778 s; after that, two took 763 s and three 574 s, the cores still 36 % idle); the sandbox
# tests of the magics and of the allocation's life a second time through the SSH runner (--over-ssh: a real sshd on 127.0.0.1,
# a second Unix user; one process, as that user is one per session; skipped without root; not when PYTEST_ARGS
# picks tests); then the timing (`serial`) tests alone, since they measure the cores. A run that selects no test
# (PYTEST_ARGS naming files of another kind) is not a failure. The whole course over SSH (`lessons_over_ssh`) is
# left to the matrix's 24.11 stage (SLURM_LESSONS_OVER_SSH below).
OVER_SSH_TESTS ?= tests/unit/magics/test_magics_sandbox.py tests/unit/magics/test_magics_hostile.py \
	tests/integration/slurm/test_allocation.py tests/integration/slurm/test_kernel_lifetime.py
# not over SSH: a "restarted kernel" started as a local subprocess (its leftovers are this machine's user's), and
# a pickled Python function as a step (this venv's Python is out of the ssh user's reach; the over-SSH function
# steps have their own test, tests/integration/ssh/test_function_steps_over_ssh.py)
OVER_SSH_SKIP ?= not test_a_restarted_kernel_finds_what_it_left and not test_a_python_function_runs_as_a_step
test: setup
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck docs
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -p no:cacheprovider -n 2 --dist worksteal \
	    -m "not sandbox and not browser and not serial" $(PYTEST_ARGS) || [[ $$? -eq 5 ]]
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -p no:cacheprovider -n 3 --dist loadfile \
	    -m "(sandbox or browser) and not serial and not lessons_over_ssh" --durations=25 $(PYTEST_ARGS) \
	    || [[ $$? -eq 5 ]]
	$(if $(PYTEST_ARGS),,$(PY) -m pytest -p no:cacheprovider --over-ssh -m "sandbox and not browser and not serial" \
	    -k "$(OVER_SSH_SKIP)" --durations=5 $(OVER_SSH_TESTS) || [[ $$? -eq 5 ]])
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(PY) -m pytest -p no:cacheprovider \
	    -m serial --durations=5 $(PYTEST_ARGS) || [[ $$? -eq 5 ]]

# the fast tier: no Slurm, no browser, both cores (pytest-xdist); HYPOTHESIS_PROFILE=dev
test-fast: venv
	$(PY) -m pytest -p no:cacheprovider -n 2 --dist worksteal -m "not sandbox and not browser and not serial" $(PYTEST_ARGS)

# The workshop course: the sandbox, a preflight allocation, every lesson notebooks/NN-*.ipynb executed in a fresh
# kernel and written as HTML into build/demo/ (index.html); the sandbox is stopped after, Ctrl-C included.
# Exit 0 only when every lesson ran without an error.
demo: setup
	$(PY) -m slurmlab.demo $(DEMO_ARGS)

# A sandbox and JupyterLab (127.0.0.1 unless SLURMLAB_LAB_IP says otherwise) on a working copy of the notebooks
# (build/lab); prints the URL with its token; Ctrl-C stops JupyterLab, its kernels and the sandbox.
lab: setup
	@$(PY) scripts/lab.py $(LAB_ARGS)

# A sandbox and a real JupyterHub on it (127.0.0.1; batchspawner: each user's server is a Slurm job); prints the
# URL, user and password; Ctrl-C stops the hub, its servers' jobs, its proxy and the sandbox it started.
# HUB_ARGS='--user alice --port 8000' (slurmlab hub up --help).
hub: setup
	@$(PY) -m slurmlab hub up --foreground $(HUB_ARGS)

# The Slurm version matrix: a Debian root per Slurm version (scripts/slurm-root.sh, cached in
# ${SLURMLAB_ROOTS:-~/.cache/slurmlab/roots}), entered with chroot (scripts/in-slurm-root.sh). Needs root.
SLURM ?=
# the lessons are left to the demo, which executes every one of them on that Slurm (not twice); one process: two
# workers in the 26.05 root started two accounting sandboxes whose slurmctld met the other's slurmdbd ("CLUSTER
# ID MISMATCH"), so the sandbox tests of a root run one at a time, the timing (`serial`) ones after the others
SLURM_PYTEST ?= -m "sandbox and not browser and not lessons and not lessons_over_ssh and not serial"
SLURM_SERIAL ?= -m "sandbox and serial and not browser and not lessons"
# the versions whose roots run the magics' and the allocation's sandbox tests a second time over SSH (as `make test`
# does on this machine's Slurm): one matrix version is enough to hold the transport to another Slurm's commands.
# There the whole course runs over SSH too (every lesson, its kernel reaching the sandbox through the loopback sshd
# only: about two minutes, which `make test` has no room for)
SLURM_OVER_SSH ?= 24.11
SLURM_LESSONS_OVER_SSH ?= tests/integration/notebook/test_lessons_over_ssh.py
# the hub's tests (the REST spawn, the Open OnDemand shape, the browser's first hour in the hub) and the kernel
# provisioner's browser test (a kernel on the node started from JupyterLab) run as a step of their own, where a skip
# fails the run: the root has node (configurable-http-proxy from the repo's hub/node_modules, which the hubproxy
# step installs on this machine) and chromium, so a skip means it lost them
SLURM_HUB_TESTS ?= tests/integration/hub tests/browser/test_hub_session.py tests/browser/test_provisioned_kernel_lab.py
slurm-root:
	@[[ -n "$(SLURM)" ]] || { echo "which Slurm? make $@ SLURM=24.11 (or 26.05)" >&2; exit 2; }
	@bash scripts/slurm-root.sh $(SLURM)

# The sandbox-marked tests, the hub's tests (a JupyterHub with batchspawner on that Slurm, in a browser too), the
# magics' argument parsing on the root's own Python (argparse changes between versions: 3.13 in trixie and sid),
# then the demo (the course, into build/demo-slurm-VERSION; any lesson error fails it); each run must leave
# nothing running.
test-slurm: slurm-root hubproxy
	@start=$$SECONDS; bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider \
	    $(SLURM_PYTEST) $(addprefix --ignore=,$(SLURM_HUB_TESTS)) $(PYTEST_ARGS); rc=$$?; \
	  [[ $$rc -eq 5 ]] && rc=0; \
	  bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider -q \
	    $(SLURM_SERIAL) $(addprefix --ignore=,$(SLURM_HUB_TESTS)) $(PYTEST_ARGS); serial=$$?; \
	  [[ $$serial -eq 0 || $$serial -eq 5 ]] || rc=1; \
	  if [[ " $(SLURM_OVER_SSH) " == *" $(SLURM) "* && -z "$(PYTEST_ARGS)" ]]; then \
	    bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider -q --over-ssh \
	      -m "sandbox and not browser and not serial" -k "$(OVER_SSH_SKIP)" $(OVER_SSH_TESTS) || rc=1; \
	    bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider -q -rs \
	      $(SLURM_LESSONS_OVER_SSH) || rc=1; fi; \
	  echo "test-slurm $(SLURM): pytest exit $$rc in $$((SECONDS - start))s"; \
	  if [[ -n "$(strip $(SLURM_HUB_TESTS))" ]]; then \
	    start=$$SECONDS; mkdir -p build; bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider \
	      -q -rs $(SLURM_HUB_TESTS) 2>&1 | tee build/test-slurm-$(SLURM)-hub.log; hub=$${PIPESTATUS[0]}; \
	    if [[ $$hub -eq 0 ]] && grep -qE '[0-9]+ skipped' build/test-slurm-$(SLURM)-hub.log; then \
	      echo "test-slurm $(SLURM): a hub test skipped in the root (reason above): the matrix must run them" >&2; \
	      hub=1; fi; \
	    [[ $$hub -eq 0 ]] || rc=1; \
	    echo "test-slurm $(SLURM): hub tests exit $$hub in $$((SECONDS - start))s"; \
	  fi; \
	  start=$$SECONDS; bash scripts/in-slurm-root.sh $(SLURM) python -m pytest -p no:cacheprovider -q -n 2 \
	    -m "not sandbox and not browser and not serial" || rc=1; \
	  echo "test-slurm $(SLURM): fast tier on the root's Python in $$((SECONDS - start))s"; \
	  start=$$SECONDS; bash scripts/in-slurm-root.sh $(SLURM) python -m slurmlab.demo \
	    --out build/demo-slurm-$(SLURM); demo=$$?; \
	  echo "test-slurm $(SLURM): demo exit $$demo in $$((SECONDS - start))s"; \
	  [[ $$rc -eq 0 && $$demo -eq 0 ]]

# Issue 14's table at a real cluster's size: every benchmarks/bench_*.py beside its baseline (medians of >= 5),
# one table with target and verdict, growth tables in nodes + jobs, build/bench.json, and the README's
# "Performance" section rewritten from it. Exit 1 when a target is missed. BENCH_ARGS='--only parse' for one.
# Issue 27's rows (benchmarks/bench_rpc.py: RPCs to slurmctld counted with sdiag on a sandbox, 60 s windows)
# add about 5 minutes; BENCH_ARGS='--only rpc' runs them alone.
bench: setup
	@$(PY) benchmarks/run_all.py $(BENCH_ARGS); rc=$$?; $(PY) scripts/bench_readme.py; exit $$rc

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
