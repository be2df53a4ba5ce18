#!/usr/bin/env bash
# One prepared GPU check, under 5 minutes on a single GPU without Slurm:
# calibrate; solo; 2 and 3 processes time-sliced; user-level MPS (SKIP if it cannot start);
# copy bandwidth; FP32 throughput. Writes one JSON report ($OUT/device_check.json, else
# ./device_check.json) and prints a summary. Run from the repository root:
#     bash tests/gpu/device_check.sh [--budget SECONDS]
set -uo pipefail

cd "$(dirname "$0")/../.."
REPO="$(pwd)"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

PY=""
for cand in "$REPO/.venv/bin/python" python3 python; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
        PY="$cand"; break
    fi
done
if [ -z "$PY" ]; then echo "device_check: SKIP no Python >= 3.10 found"; exit 0; fi

if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>&1 | head -8
else
    echo "device_check: nvidia-smi not found; the driver may be missing"
fi

# numpy and cupy: install from pip when missing (pick the wheel for the driver's CUDA major)
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    "$PY" -m pip install -q --timeout 20 --retries 1 numpy || echo "device_check: could not install numpy"
fi
if ! "$PY" -c 'import cupy' 2>/dev/null; then
    cuda_major="$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: \([0-9]*\).*/\1/p' | head -1)"
    wheel="cupy-cuda13x"
    if [ -n "$cuda_major" ] && [ "$cuda_major" -lt 13 ]; then wheel="cupy-cuda12x"; fi
    echo "device_check: installing $wheel (driver CUDA ${cuda_major:-unknown})"
    "$PY" -m pip install -q --timeout 20 --retries 1 "$wheel" || echo "device_check: could not install $wheel"
fi

exec timeout -k 10 290 "$PY" "$REPO/tests/gpu/device_check.py" "$@"
