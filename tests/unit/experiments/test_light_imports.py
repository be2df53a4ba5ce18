"""The experiments room loads no heavy package until a GPU path or a chart is used."""

from __future__ import annotations

import subprocess
import sys

from slurmlab.experiments.node.gpu_worker import _bus_key, _uuid_text

MODULES = (
    "analysis", "bandwidth", "gres_conf", "isolation", "isolation_result", "plan", "protocols", "slurm_view",
    "steps", "timeslice", "timeslice_result", "verify", "workers",
    "node.compile", "node.cpu_worker", "node.gpu_worker", "node.verify_task", "node.worker",
)  # fmt: skip


def test_importing_every_experiment_module_loads_neither_cupy_nor_bokeh() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module('slurmlab.experiments.' + name)\n"
        "import slurmlab.commands.experiments\n"
        "print(sorted(m for m in ('cupy', 'bokeh') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_every_experiment_module_is_listed_here() -> None:
    from pathlib import Path

    import slurmlab.experiments as pkg

    root = Path(pkg.__file__).parent
    found = {
        ".".join(p.relative_to(root).with_suffix("").parts)
        for p in root.rglob("*.py")
        if p.name != "__init__.py"
    }
    assert found == set(MODULES)


def test_gpu_identity_helpers() -> None:
    assert _uuid_text(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    assert _uuid_text(bytes(range(16)), "MIG").startswith("MIG-00010203-")
    assert _uuid_text(b"short") is None
    assert _bus_key("00000000:18:00.0") == "0000:18:00.0"
    assert _bus_key("0000:2A:00.0") == "0000:2a:00.0"
