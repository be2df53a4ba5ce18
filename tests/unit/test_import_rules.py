"""The rooms of DESIGN §1 and the direction of imports between them.

core <- slurm <- {magics, widgets, server, sandbox}; viz and experiments import core only.
Every import in a module counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "slurmlab"

HEAVY = {"bokeh", "ipywidgets", "cupy", "IPython", "ipykernel", "jupyter_server", "tornado", "pynvml",
         "jupyter_bokeh", "notebook", "jupyterlab"}
IO_MODULES = {"subprocess", "socket", "asyncio", "threading", "shutil", "urllib", "http", "multiprocessing",
              "selectors", "signal", "ctypes"}

# room -> slurmlab rooms it may import
ALLOWED_ROOMS: dict[str, set[str]] = {
    "core": {"core"},
    "slurm": {"core", "slurm"},
    "topology": {"core", "slurm", "topology"},
    "viz": {"core", "viz"},
    "experiments": {"core", "experiments"},
    "widgets": {"core", "slurm", "topology", "viz", "widgets", "experiments"},
    "magics": {"core", "slurm", "topology", "viz", "widgets", "experiments", "magics", "sandbox"},
    "server": {"core", "slurm", "topology", "server"},
    "sandbox": {"core", "slurm", "sandbox"},
}
ALWAYS = {"errors", "_extras", "__init__"}

# room -> third-party heavy packages it may import
ALLOWED_HEAVY: dict[str, set[str]] = {
    "core": set(),
    "slurm": set(),
    "sandbox": set(),
    "topology": {"pynvml"},
    "viz": {"bokeh", "jupyter_bokeh"},
    "experiments": {"cupy"},
    "widgets": {"ipywidgets", "IPython", "bokeh", "jupyter_bokeh"},
    "magics": {"IPython", "ipywidgets", "ipykernel"},
    "server": {"jupyter_server", "tornado"},
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "labextension" not in p.parts)


def _room(path: Path) -> str | None:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(path.relative_to(PKG.parent).with_suffix("").parts[: -node.level])
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


CASES = [p for p in _modules() if _room(p) in ALLOWED_ROOMS]


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(PKG)) for p in CASES])
def test_room_imports_follow_the_design(path: Path) -> None:
    room = _room(path)
    assert room is not None
    problems = []
    for line, name in _imports(path):
        top = name.split(".")[0]
        if top == "slurmlab":
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 else "__init__"
            if target not in ALWAYS and target not in ALLOWED_ROOMS[room]:
                problems.append(f"line {line}: {room}/ must not import {name}")
        elif top in HEAVY and top not in ALLOWED_HEAVY[room]:
            problems.append(f"line {line}: {room}/ must not import {top}")
        elif room == "core" and top in IO_MODULES:
            problems.append(f"line {line}: core/ is pure and must not import {top}")
    assert not problems, "\n".join(problems)


def test_the_rule_itself_catches_a_violation(tmp_path: Path) -> None:
    # a core module that runs a subprocess and imports slurm must be flagged
    bad = PKG / "core" / "_tmp_bad_for_test.py"
    bad.write_text("import subprocess\nfrom slurmlab.slurm import runner\n")
    try:
        with pytest.raises(AssertionError) as info:
            test_room_imports_follow_the_design(bad)
        assert "subprocess" in str(info.value) and "slurmlab.slurm" in str(info.value)
    finally:
        bad.unlink()


def test_no_shell_true_anywhere() -> None:
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                if isinstance(node.value, ast.Constant) and node.value.value is True:
                    offenders.append(f"{path.relative_to(PKG)}:{node.value.lineno}")
    assert not offenders, offenders


def test_only_slurm_room_runs_slurm_commands() -> None:
    """Slurm's client commands appear as argv only in slurmlab/slurm (the sandbox starts daemons)."""
    clients = {"squeue", "sinfo", "scontrol", "salloc", "srun", "sbatch", "scancel", "sacct"}
    offenders = []
    for path in _modules():
        room = _room(path)
        if room in {"slurm", None, "testing", "commands"}:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.List) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value in clients:
                    offenders.append(f"{path.relative_to(PKG)}:{node.lineno} builds a {first.value} argv")
    assert not offenders, "\n".join(offenders)
