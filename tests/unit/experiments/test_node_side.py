"""The node side runs on a compute node without the rest of slurmlab.

Two checks: every module under ``experiments/node/`` imports only the standard library, NumPy,
CuPy, each other, slurmlab's foundation (``errors``, ``_extras``: ``import slurmlab`` loads them
anyway) and the one framing of task reports (``core.framing``, standard library only); and, in a
fresh interpreter where every other slurmlab module refuses to import, each node module imports, a CPU worker runs a whole measurement and the verify task prints its report.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import slurmlab.experiments.node as node_pkg
from slurmlab.core.framing import BEGIN, END

NODE = Path(node_pkg.__file__).parent
NODE_MODULES = sorted(p.stem for p in NODE.glob("*.py") if p.name != "__init__.py")
THIRD_PARTY = {"numpy", "cupy"}
FOUNDATION = {"slurmlab", "slurmlab.errors", "slurmlab._extras", "slurmlab.core", "slurmlab.core.framing"}

# a meta-path hook that refuses every slurmlab module outside the node side and its foundation
BLOCKER = """
import importlib.abc, sys
ALLOWED = {"slurmlab", "slurmlab.errors", "slurmlab._extras", "slurmlab.experiments", "slurmlab.core", "slurmlab.core.framing"}
class NodeOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("slurmlab") and name not in ALLOWED and not name.startswith("slurmlab.experiments.node"):
            raise ImportError(f"{name} is not available on this node")
        return None
sys.meta_path.insert(0, NodeOnly())
"""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def test_node_modules_import_only_the_standard_library_numpy_cupy_and_each_other() -> None:
    assert {"worker", "cpu_worker", "gpu_worker", "compile", "verify_task"} <= set(NODE_MODULES)
    problems = []
    for path in sorted(NODE.glob("*.py")):
        for name in sorted(_imports(path)):
            top = name.split(".")[0]
            ok = (
                top in sys.stdlib_module_names
                or top in THIRD_PARTY
                or name in FOUNDATION
                or name.startswith("slurmlab.experiments.node")
            )
            if not ok:
                problems.append(f"{path.name} imports {name}")
    assert not problems, problems


def test_the_check_itself_catches_an_import_of_another_room(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from slurmlab.core.slurm import hostlist\n")
    assert "slurmlab.core.slurm" in _imports(bad)
    code = BLOCKER + "import slurmlab.core.slurm.hostlist\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "not available on this node" in out.stderr


def test_node_modules_run_with_every_other_room_unimportable(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text("ClusterName=x\n")
    (tmp_path / "gres.conf").write_text("Name=gpu Type=h100 File=/dev/nvidia[0-1] Cores=0-3\n")
    t0 = time.time_ns() + 2_000_000_000
    pin = str(min(os.sched_getaffinity(0)))
    code = (
        BLOCKER
        + "import importlib, io, json, runpy, contextlib\n"
        + f"for name in {NODE_MODULES!r}:\n"
        + "    importlib.import_module('slurmlab.experiments.node.' + name)\n"
        + "out = {}\n"
        + "for module, argv in (\n"
        + f"    ('worker', ['--backend', 'cpu', '--t0', '{t0}', '--duration', '0.1', '--fma-iters', '5', '--pin', '{pin}']),\n"
        + "    ('verify_task', ['--backend', 'cpu']),\n"
        + "):\n"
        + "    sys.argv = ['x', *argv]\n"
        + "    buf = io.StringIO()\n"
        + "    with contextlib.redirect_stdout(buf):\n"
        + "        try:\n"
        + "            runpy.run_module('slurmlab.experiments.node.' + module, run_name='__main__')\n"
        + "        except SystemExit as exc:\n"
        + "            assert exc.code == 0, (module, exc.code, buf.getvalue())\n"
        + "    out[module] = buf.getvalue()\n"
        + "loaded = sorted(m for m in sys.modules if m.startswith('slurmlab') and m.count('.') >= 1)\n"
        + "print(json.dumps({'out': out, 'loaded': loaded}))\n"
    )
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf"), "SLURMD_NODENAME": "n1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {m.split(".")[1] for m in data["loaded"]} <= {"errors", "_extras", "experiments", "core"}
    report = json.loads(data["out"]["worker"])
    assert "error" not in report and report["timeslice"]["n_runs_total"] >= 1 and report["fixed_work"]
    line = data["out"]["verify_task"].strip()
    assert line.startswith(BEGIN) and line.endswith(END)
    task = json.loads(line[len(BEGIN) : -len(END)])
    assert task["node"] == "n1" and task["gres_conf"]["gpu_lines"] == [
        "Name=gpu Type=h100 File=/dev/nvidia[0-1] Cores=0-3"
    ]
