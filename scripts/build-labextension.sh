#!/usr/bin/env bash
# Build the JupyterLab extension when its sources exist (filled in by the JupyterLab issue).
set -euo pipefail
PY=${1:-.venv/bin/python}
if [[ ! -f extensions/slurmlab-lab/package.json ]]; then
  exit 0
fi
exec bash extensions/slurmlab-lab/build.sh "$PY"
