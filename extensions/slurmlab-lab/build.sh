#!/usr/bin/env bash
# The JupyterLab extension's one entry point for `make`: its node dependencies (package.json and
# yarn.lock, through jlpm), then one of
#   build (default)  `jlpm build` into slurmlab/labextension/ -- the package.json script the wheel's
#                    build hook (pyproject.toml) runs too -- and enable it and the server extension in
#                    the given virtual environment; quick when nothing changed (a hash of the sources
#                    is kept beside the build)
#   --force          the same, building even when nothing changed
#   lint             `jlpm lint:check`: stylelint, prettier and eslint, as the extension template has them
#   test             `jlpm test`: the jest unit tests (src/__tests__)
# Where node/npm are missing it says so and does nothing (exit 0).
#   usage: bash extensions/slurmlab-lab/build.sh PATH_TO_VENV_PYTHON [build|--force|lint|test]
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${1:-$REPO/.venv/bin/python}
TASK=${2:-build}
[[ $PY == /* ]] || PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
BIN=$(dirname "$PY")
OUT=$REPO/slurmlab/labextension
NAME=slurmlab-lab

case $TASK in
  build | --force | lint | test) ;;
  *) echo "lab: unknown task '$TASK' (build, --force, lint or test)" >&2; exit 2 ;;
esac
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "lab: node/npm not found; skipping the JupyterLab extension's $TASK (install nodejs and npm for it)" >&2
  exit 0
fi
if [[ ! -x $BIN/jlpm ]]; then
  echo "lab: $BIN/jlpm not found; install the test extras first (pip install -e '.[test]')" >&2
  exit 1
fi
export PATH=$BIN:$PATH
# jlpm (yarn 3) ignores npm's registry setting: use whatever npm is configured with.
YARN_NPM_REGISTRY_SERVER=$(npm config get registry)
export YARN_NPM_REGISTRY_SERVER=${YARN_NPM_REGISTRY_SERVER%/}
export YARN_ENABLE_TELEMETRY=0 YARN_ENABLE_GLOBAL_CACHE=1

cd "$HERE"
# What the built extension is made of (the unit tests are not part of it).
sources_hash() {
  find src schema style package.json tsconfig.json yarn.lock .yarnrc.yml -path src/__tests__ -prune \
      -o -type f -print0 2>/dev/null \
    | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

# Dependencies, the build's and the lint and test tools': only when package.json/yarn.lock changed
# since the last install.
deps_stamp=node_modules/.slurmlab-deps
deps_hash=$(cat package.json yarn.lock 2>/dev/null | sha256sum | cut -d' ' -f1)
if [[ ! -f $deps_stamp || $(cat "$deps_stamp") != "$deps_hash" ]]; then
  echo "lab: installing node dependencies from $YARN_NPM_REGISTRY_SERVER"
  [[ -f yarn.lock ]] || touch yarn.lock
  jlpm install
  cat package.json yarn.lock | sha256sum | cut -d' ' -f1 > "$deps_stamp"
fi

case $TASK in
  lint) exec jlpm lint:check ;;
  test) exec jlpm test --ci ;;
esac

hash=$(sources_hash)
# The stamp lives beside the sources (git-ignored lib/), not in the output that goes into the wheel.
stamp=$HERE/lib/.slurmlab-build
if [[ $TASK != --force && -f $OUT/package.json && -f $OUT/static/style.js && -f $stamp \
      && $(cat "$stamp") == "$hash" ]]; then
  echo "lab: extension up to date in slurmlab/labextension"
else
  echo "lab: building the JupyterLab extension"
  jlpm build
  rm -f "$OUT/.slurmlab-build"
  echo "$hash" > "$stamp"
fi

# Enable both halves in this environment (what the wheel's shared data does on install).
PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')
mkdir -p "$PREFIX/share/jupyter/labextensions" "$PREFIX/etc/jupyter/jupyter_server_config.d"
dest=$PREFIX/share/jupyter/labextensions/$NAME
# An editable install copies the extension as it was then; point at the live build instead.
if [[ -d $dest && ! -L $dest ]]; then
  rm -rf "$dest"
fi
ln -sfn "$OUT" "$dest"
cp "$REPO/jupyter-config/jupyter_server_config.d/slurmlab.json" "$PREFIX/etc/jupyter/jupyter_server_config.d/slurmlab.json"
echo "lab: slurmlab-lab and slurmlab.server enabled in $PREFIX"
