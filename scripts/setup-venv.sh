#!/usr/bin/env bash
# Create the project's virtual environment and install slurmlab with its test extras.
set -euo pipefail
PYTHON=${1:-python3}
VENV=${2:-.venv}
if [[ ! -x $VENV/bin/python ]]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e '.[test]'
echo "setup: python environment ready in $VENV"
