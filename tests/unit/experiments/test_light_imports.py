"""The experiments room loads no heavy package until a GPU path or a chart is used."""

from __future__ import annotations

import subprocess
import sys

from slurmlab.experiments.gpu_worker import _bus_key, _uuid_text


def test_importing_every_experiment_module_loads_neither_cupy_nor_bokeh() -> None:
    code = (
        "import sys\n"
        "import slurmlab.experiments.analysis, slurmlab.experiments.worker, slurmlab.experiments.local\n"
        "import slurmlab.experiments.isolation, slurmlab.experiments.bandwidth, slurmlab.experiments.compile\n"
        "import slurmlab.experiments.gpu_worker, slurmlab.experiments.cpu_worker, slurmlab.commands.experiments\n"
        "print(sorted(m for m in ('cupy', 'bokeh') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_gpu_identity_helpers() -> None:
    assert _uuid_text(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert _uuid_text(bytes(range(16)), "MIG").startswith("MIG-00010203-")
    assert _uuid_text(b"short") is None
    assert _bus_key("00000000:18:00.0") == "0000:18:00.0"
    assert _bus_key("0000:2A:00.0") == "0000:2a:00.0"
