#!/usr/bin/env bash
# Create the project's virtual environment and install slurmlab with its test extras.
set -euo pipefail
PYTHON=${1:-python3}
VENV=${2:-.venv}
if [[ ! -x $VENV/bin/python ]]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# An editable install may build the JupyterLab extension through hatch-jupyter-builder's jlpm
# (yarn 3), which ignores npm's registry setting: hand it the registry npm is configured with.
if command -v npm >/dev/null; then
  registry=$(npm config get registry 2>/dev/null || true)
  [[ -n $registry ]] && export YARN_NPM_REGISTRY_SERVER=${registry%/}
fi
"$VENV/bin/python" -m pip install -q -e '.[test]'
echo "setup: python environment ready in $VENV"
