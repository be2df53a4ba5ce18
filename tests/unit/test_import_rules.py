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
    "topology": {"core", "slurm", "sandbox", "topology"},
    "viz": {"core", "viz"},
    "experiments": {"core", "experiments"},
    "widgets": {"core", "slurm", "topology", "viz", "widgets", "experiments"},
    "magics": {"core", "slurm", "topology", "viz", "widgets", "experiments", "magics", "sandbox"},
    "server": {"core", "slurm", "topology", "server"},
    "sandbox": {"core", "slurm", "sandbox"},
}
ALWAYS = {"errors", "_extras", "__init__"}
# Reaching up, allowed only inside a function (lazily) and only these: Allocation.topology()/.mig()
# delegate to the topology room, which itself runs its probes as steps of the allocation.
LAZY_UP: dict[str, set[str]] = {"slurm": {"topology"}}

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


def _imports(path: Path, *, module_level_only: bool = False) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    nodes = _module_level(tree) if module_level_only else ast.walk(tree)
    for node in nodes:
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


def _module_level(tree: ast.Module) -> list[ast.AST]:
    """Statements that run at import time (not inside a function or a method)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


CASES = [p for p in _modules() if _room(p) in ALLOWED_ROOMS]


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(PKG)) for p in CASES])
def test_room_imports_follow_the_design(path: Path) -> None:
    room = _room(path)
    assert room is not None
    problems = []
    eager = set(_imports(path, module_level_only=True))
    for line, name in _imports(path):
        top = name.split(".")[0]
        if top == "slurmlab":
            parts = name.split(".")
            target = parts[1] if len(parts) > 1 else "__init__"
            lazy_ok = target in LAZY_UP.get(room, set()) and (line, name) not in eager
            if target not in ALWAYS and target not in ALLOWED_ROOMS[room] and not lazy_ok:
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


def test_reaching_up_at_import_time_is_still_refused() -> None:
    bad = PKG / "slurm" / "_tmp_bad_for_test.py"
    bad.write_text("from slurmlab.topology import topology\n\ndef f():\n    from slurmlab.topology import mig\n")
    try:
        with pytest.raises(AssertionError) as info:
            test_room_imports_follow_the_design(bad)
        assert "line 1" in str(info.value) and "line 4" not in str(info.value)
    finally:
        bad.unlink()
