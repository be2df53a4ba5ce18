#!/usr/bin/env bash
# The JupyterLab extension through its one entry point (extensions/slurmlab-lab/build.sh):
#   bash scripts/build-labextension.sh [PATH_TO_VENV_PYTHON] [build|--force|lint|test]
set -euo pipefail
PY=${1:-.venv/bin/python}
TASK=${2:-build}
if [[ ! -f extensions/slurmlab-lab/package.json ]]; then
  exit 0
fi
exec bash extensions/slurmlab-lab/build.sh "$PY" "$TASK"
