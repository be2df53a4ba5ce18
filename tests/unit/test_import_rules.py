"""The rooms of DESIGN §1 and the direction of imports between them, checked on the import graph of the package.

    core.slurm <- core.gpu <- core.request  (core: standard library only, no I/O)
    core <- slurm <- {sandbox, widgets, server, magics};  viz and experiments import core only

Every import counts: at module level, inside a function (lazy), under ``TYPE_CHECKING``, and by name in a string
(``importlib.import_module("…")``, ``__import__("…")``, ``require("…")``, or a string constant that names a module
of the package, as a table of lazy exports does). The rule holds for what a module reaches through others too,
and no two rooms may import each other, however far round. Third-party packages are allowed only in the rooms
that need them (numpy is one of them: the experiments only).

The checks read sources, never files written for the purpose: the tests that plant a violation of each kind add
a virtual module to the sources of the real package.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "slurmlab"

# ---- the design ------------------------------------------------------------------------------------

_BASE = {"errors", "_extras"}
_CORE = {"core", "core.slurm", "core.gpu", "core.request", "core.diagnosis"}
_LIBRARY = _BASE | _CORE | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets", "magics",
                            "server", "teach"}

# room -> the other rooms it may import (directly or through any module in between)
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_extras": {"errors"},
    "core": {"errors"},
    "core.slurm": {"core", "errors"},
    "core.gpu": {"core", "core.slurm", "errors"},
    "core.request": {"core", "core.slurm", "core.gpu", "errors"},
    "core.diagnosis": {"core", "core.slurm", "core.gpu", "core.request", "errors"},
    "slurm": _CORE | _BASE,
    "viz": _CORE | _BASE,
    # the node side runs in the allocation, on a Python that may have little more than slurmlab
    "experiments.node": set(_BASE),
    "experiments": _CORE | _BASE | {"experiments.node"},
    "sandbox": _CORE | _BASE | {"slurm"},
    "widgets": _CORE | _BASE | {"slurm", "viz"},
    "server": _CORE | _BASE | {"slurm"},
    "magics": _CORE | _BASE | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets"},
    "commands": _CORE | _BASE | {"slurm", "sandbox", "viz", "experiments", "experiments.node"},
    # the teacher's helpers (public, beside the front door): what the lessons use from the rooms below
    "teach": _CORE | _BASE | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets", "magics"},
    "testing": _CORE | _BASE | {"slurm", "sandbox"},
    # the top-level modules: the front door (``slurmlab/__init__.py``, lazy exports of every library room) and
    # the programs
    "slurmlab": set(_LIBRARY),
    # the workshop course: executes the lessons on the sandbox and writes them as HTML (make demo)
    "course": _CORE | _BASE | {"slurm", "sandbox"},
    "demo": _CORE | _BASE | {"slurm", "sandbox", "course"},
    "cli": _LIBRARY | {"slurmlab", "commands"},
    "__main__": _LIBRARY | {"slurmlab", "commands", "cli"},
}

# third-party packages (everything outside the standard library) each room may import; a sub-room not listed
# has its room's
THIRD_PARTY: dict[str, set[str]] = {
    "slurm": {"pyslurm", "cloudpickle"},
    "viz": {"bokeh", "jupyter_bokeh", "playwright"},
    "experiments": {"numpy"},
    "experiments.node": {"numpy", "cupy"},
    "widgets": {"ipywidgets", "IPython", "jupyter_bokeh"},
    "magics": {"IPython", "ipywidgets", "ipykernel"},
    "server": {"jupyter_server", "tornado"},
    "testing": {"pytest"},
    "course": {"nbclient", "nbformat", "nbconvert"},
}

# core is pure: none of these, and no open()/print()/input()
IO_MODULES = {"os", "io", "sys", "pathlib", "subprocess", "socket", "asyncio", "threading", "shutil", "urllib",
              "http", "multiprocessing", "selectors", "signal", "ctypes", "tempfile", "glob", "fcntl", "select",
              "pty", "mmap", "sqlite3", "importlib", "logging", "time", "concurrent", "resource", "pwd", "grp",
              "platform", "webbrowser", "zipfile", "tarfile", "pickle", "shelve", "atexit"}
IO_BUILTINS = {"open", "print", "input", "exec", "eval", "breakpoint", "__import__"}
# calls that import the module named by their first argument
STRING_IMPORTERS = {"import_module", "__import__", "require", "find_spec"}

_SUBROOMS = {"core": ("slurm", "gpu", "request", "diagnosis"), "experiments": ("node",)}


def room_of(module: str) -> str:
    """``slurmlab.core.gpu.topology`` -> ``core.gpu``; ``slurmlab.cli`` -> ``cli``; ``slurmlab`` -> ``slurmlab``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "slurmlab"
    room = parts[1]
    if len(parts) > 2 and parts[2] in _SUBROOMS.get(room, ()):
        return f"{room}.{parts[2]}"
    return room


def allowed_third_party(room: str) -> set[str]:
    return THIRD_PARTY.get(room, THIRD_PARTY.get(room.split(".")[0], set()))


# ---- reading the sources ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    text: str
    is_package: bool = False  # an __init__.py: relative imports start from the module itself


@dataclass(frozen=True)
class Edge:
    module: str  # the importing module
    target: str  # a module of the package, or the top-level name of another package
    line: int
    how: str  # "import", "lazy import" (inside a function), "string import"


def package_sources(root: Path = PKG) -> dict[str, Source]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("").parts
        if "labextension" in rel:
            continue
        is_package = rel[-1] == "__init__"
        out[".".join(rel[:-1] if is_package else rel)] = Source(path.read_text(), is_package)
    return out


def _own_module(name: str, modules: Mapping[str, Source]) -> str:
    """The longest prefix of ``name`` that is a module of the package (``a.b.attr`` -> ``a.b``)."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) or name.split(".")[0]


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _walk(tree: ast.Module) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it runs only when a function is called."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, lazy = todo.pop()
        yield node, lazy
        inner = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))


def _string_arg(call: ast.Call) -> str | None:
    """The module a string-import call names (the constant start of an f-string is enough for its package)."""
    if not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        head = str(arg.values[0].value).split(".")[0]
        return head or None
    return None


@functools.cache
def _scan_source(name: str, source: Source) -> tuple[tuple[tuple[tuple[str, ...], int, str], ...], tuple[str, ...]]:
    """The imports of one module as (candidate targets, best first; line; how), and its I/O calls."""
    tree = ast.parse(source.text, filename=name)
    package = name if source.is_package else name.rpartition(".")[0]
    docstrings = _docstrings(tree)
    found: list[tuple[tuple[str, ...], int, str]] = []
    io_calls: list[str] = []
    for node, lazy in _walk(tree):
        how = "lazy import" if lazy else "import"
        if isinstance(node, ast.Import):
            found += [((alias.name,), node.lineno, how) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # ``from a.b import c``: the module a.b.c where there is one, else a.b
            found += [((f"{base}.{alias.name}", base), node.lineno, how) for alias in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            target = _string_arg(node) if called in STRING_IMPORTERS else None
            if target:
                found.append(((target,), node.lineno, "string import"))
            if isinstance(func, ast.Name) and func.id in IO_BUILTINS:
                io_calls.append(f"line {node.lineno}: {func.id}()")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("slurmlab.")
              and id(node) not in docstrings):
            # a table of lazy exports or subcommands: the module is imported by this name (checked below)
            found.append(((node.value,), node.lineno, "string constant"))
    found.sort(key=lambda f: f[1])
    io_calls.sort(key=lambda c: int(c.split()[1].rstrip(":")))
    return tuple(found), tuple(io_calls)


def scan(name: str, source: Source, modules: Mapping[str, Source]) -> tuple[list[Edge], list[str]]:
    """The imports of one module, resolved against the package's modules, and its I/O calls (``open`` …)."""
    raw, io_calls = _scan_source(name, source)
    edges = []
    for candidates, line, how in raw:
        if how == "string constant":
            if candidates[0] not in modules:
                continue  # a string that names no module (an attribute path in a message) imports nothing
            how = "string import"
        target = next((c for c in candidates if c in modules), candidates[-1])
        top = target.split(".")[0]
        edges.append(Edge(name, _own_module(target, modules) if top == "slurmlab" else top, line, how))
    return edges, list(io_calls)


# ---- the checks ------------------------------------------------------------------------------------


def _graph(modules: Mapping[str, Source]) -> tuple[dict[str, list[Edge]], dict[str, list[str]]]:
    edges, io_calls = {}, {}
    for name, source in modules.items():
        edges[name], io_calls[name] = scan(name, source, modules)
    return edges, io_calls


def _is_stdlib(top: str) -> bool:
    return top in sys.stdlib_module_names or top == "__future__"


def _path(parents: Mapping[str, str | None], end: str) -> list[str]:
    out = [end]
    while (parent := parents[out[-1]]) is not None:
        out.append(parent)
    return out[::-1]


def problems(modules: Mapping[str, Source]) -> dict[str, list[str]]:
    """module -> what it breaks: a room it may not import (directly or through others), a third-party package
    its room may not use, I/O in core. A module in no known room is a problem of its own."""
    edges, io_calls = _graph(modules)
    out: dict[str, list[str]] = {}
    for name in modules:
        room = room_of(name)
        found = out.setdefault(name, [])
        if room not in ALLOWED:
            found.append(f"{name} is in no room of the design ({room!r}): add it to ALLOWED")
            continue
        ok = ALLOWED[room] | {room}
        for e in edges[name]:
            if e.target.split(".")[0] == "slurmlab":
                if room_of(e.target) not in ok:
                    found.append(f"line {e.line}: {room} must not import {e.target} ({e.how})")
                continue
            if room.startswith("core") and e.target in IO_MODULES:
                found.append(f"line {e.line}: core is pure and must not import {e.target} ({e.how})")
            elif not _is_stdlib(e.target) and e.target not in allowed_third_party(room):
                found.append(f"line {e.line}: {room} must not import the package {e.target} ({e.how})")
        if room.startswith("core"):
            found += [f"{call}: core is pure and does no I/O" for call in io_calls[name]]
        # what the module reaches through others: the first path to each room it may not reach
        parents: dict[str, str | None] = {name: None}
        todo = [name]
        told: set[str] = set()
        while todo:
            here = todo.pop(0)
            for e in edges.get(here, ()):
                if e.target not in modules or e.target in parents:
                    continue
                parents[e.target] = here
                todo.append(e.target)
                target_room = room_of(e.target)
                if target_room not in ok and target_room not in told:
                    told.add(target_room)
                    if here != name:  # a direct import is told above
                        found.append(f"{room} reaches {target_room} through "
                                     + " -> ".join(_path(parents, e.target)))
    return out


def room_circles(modules: Mapping[str, Source]) -> list[str]:
    """Circles between rooms (A imports B and B, however far round, imports A), each with the imports that make it."""
    edges, _ = _graph(modules)
    between: dict[str, dict[str, Edge]] = {}
    for name in modules:
        for e in edges[name]:
            if e.target in modules and room_of(e.target) != room_of(name):
                between.setdefault(room_of(name), {}).setdefault(room_of(e.target), e)
    circles = []
    seen: set[frozenset[str]] = set()
    for start in sorted(between):
        # the shortest way back to ``start`` from each room it imports
        parents: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            here = todo.pop(0)
            for nxt in sorted(between.get(here, {})):
                if nxt == start:
                    loop = [*_path(parents, here), start]
                    key = frozenset(loop)
                    if key not in seen:
                        seen.add(key)
                        how = "; ".join(f"{between[a][b].module} line {between[a][b].line} imports "
                                        f"{between[a][b].target}" for a, b in zip(loop, loop[1:], strict=False))
                        circles.append(f"{' -> '.join(loop)} ({how})")
                    todo.clear()
                    break
                if nxt not in parents:
                    parents[nxt] = here
                    todo.append(nxt)
    return circles


# ---- the package as it is --------------------------------------------------------------------------


@functools.cache
def _real() -> dict[str, Source]:
    return package_sources()


@functools.cache
def _real_problems() -> dict[str, list[str]]:
    return problems(_real())


MODULES = sorted(_real())


@pytest.mark.parametrize("module", MODULES)
def test_module_follows_the_design(module: str) -> None:
    found = _real_problems()[module]
    assert not found, f"{module} ({room_of(module)}):\n  " + "\n  ".join(found)


def test_no_circle_between_rooms() -> None:
    circles = room_circles(_real())
    assert not circles, "\n".join(circles)


def test_every_room_of_the_package_is_in_the_design() -> None:
    rooms = {room_of(m) for m in MODULES}
    assert rooms <= set(ALLOWED), sorted(rooms - set(ALLOWED))
    # and the design names no room the package lacks (a room removed stays out of the table)
    assert set(ALLOWED) <= rooms, sorted(set(ALLOWED) - rooms)


def test_the_design_table_is_closed_and_has_no_circle() -> None:
    # what a room may import, it may reach; so what those rooms may import, it may import too
    for room, allowed in ALLOWED.items():
        for other in allowed:
            assert ALLOWED[other] <= allowed | {room}, (room, other, ALLOWED[other] - allowed)
            assert room not in ALLOWED[other], f"{room} and {other} may import each other"


# ---- each kind of violation, planted in a virtual module beside the real ones -------------------------


def _plant(**virtual: str) -> dict[str, Source]:
    modules = dict(_real())
    for name, text in virtual.items():
        modules["slurmlab." + name.replace("__", ".")] = Source(text)
    return modules


def test_a_direct_upward_import_is_caught() -> None:
    found = problems(_plant(core__gpu___planted="from slurmlab.slurm.runner import Runner\n"))
    (problem,) = [p for p in found["slurmlab.core.gpu._planted"] if "must not" in p]
    assert problem == "line 1: core.gpu must not import slurmlab.slurm.runner (import)"


def test_a_lazy_upward_import_is_caught() -> None:
    found = problems(_plant(slurm___planted="import json\n\n\ndef f():\n    from slurmlab.widgets import form\n"))
    assert "line 5: slurm must not import slurmlab.widgets.form (lazy import)" in found["slurmlab.slurm._planted"]
    # a sub-room may not reach up either, lazily or not: core.slurm is below core.request
    found = problems(_plant(core__slurm___planted="def f():\n    import slurmlab.core.request.request\n"))
    assert any("must not import slurmlab.core.request.request (lazy import)" in p
               for p in found["slurmlab.core.slurm._planted"])


def test_string_imports_are_caught() -> None:
    text = ('import importlib\n\nfrom slurmlab._extras import require\n\n'
            'LAZY = {"Form": "slurmlab.widgets.form"}\n\n\n'
            'def f():\n'
            '    importlib.import_module("slurmlab.magics")\n'
            '    require("bokeh.plotting", feature="a chart", extra="viz")\n'
            '    return __import__("IPython")\n')
    found = problems(_plant(slurm___planted=text))["slurmlab.slurm._planted"]
    assert "line 5: slurm must not import slurmlab.widgets.form (string import)" in found
    assert "line 9: slurm must not import slurmlab.magics (string import)" in found
    assert "line 10: slurm must not import the package bokeh (string import)" in found
    assert "line 11: slurm must not import the package IPython (string import)" in found
    # a docstring that names a module imports nothing
    quiet = problems(_plant(slurm___planted='"""See slurmlab.widgets.form."""\n'))["slurmlab.slurm._planted"]
    assert quiet == []


def test_reaching_a_room_through_another_module_is_caught() -> None:
    # viz may import core.gpu; core.gpu reaching slurm lazily makes viz reach slurm too
    found = problems(_plant(viz___planted="from slurmlab.core.gpu import _planted\n",
                            core__gpu___planted="def f():\n    from slurmlab.slurm import runner\n"))
    assert ("viz reaches slurm through slurmlab.viz._planted -> slurmlab.core.gpu._planted -> "
            "slurmlab.slurm.runner") in found["slurmlab.viz._planted"]
    assert any("must not import slurmlab.slurm.runner" in p for p in found["slurmlab.core.gpu._planted"])


def test_a_circle_between_rooms_is_caught() -> None:
    # core.request already imports core.slurm: core.slurm importing core.request closes a circle
    modules = _plant(core__slurm___planted="from slurmlab.core.request import request\n")
    circles = room_circles(modules)
    assert any(c.startswith("core.request -> core.slurm -> core.request") or
               c.startswith("core.slurm -> core.request -> core.slurm") for c in circles), circles
    assert any("slurmlab.core.slurm._planted line 1 imports slurmlab.core.request.request" in c for c in circles)


def test_a_heavy_package_outside_its_room_is_caught() -> None:
    found = problems(_plant(slurm___planted="import numpy as np\n", viz___planted="import bokeh\n",
                            widgets___planted="def f():\n    import cupy\n"))
    assert found["slurmlab.slurm._planted"] == ["line 1: slurm must not import the package numpy (import)"]
    assert found["slurmlab.viz._planted"] == []
    assert found["slurmlab.widgets._planted"] == ["line 2: widgets must not import the package cupy (lazy import)"]


def test_io_in_core_is_caught() -> None:
    text = "import subprocess\nfrom pathlib import Path\n\n\ndef f():\n    return open('x').read()\n"
    found = problems(_plant(core__gpu___planted=text))["slurmlab.core.gpu._planted"]
    assert found == ["line 1: core is pure and must not import subprocess (import)",
                     "line 2: core is pure and must not import pathlib (import)",
                     "line 6: open(): core is pure and does no I/O"]
    # the same module elsewhere is fine: only core is pure
    assert problems(_plant(slurm___planted=text))["slurmlab.slurm._planted"] == []


def test_a_module_outside_every_room_is_caught() -> None:
    found = problems(_plant(somewhere="import json\n"))["slurmlab.somewhere"]
    assert found == ["slurmlab.somewhere is in no room of the design ('somewhere'): add it to ALLOWED"]


# ---- other rules of the design ---------------------------------------------------------------------


def _trees() -> Iterator[tuple[str, ast.Module]]:
    for name, source in _real().items():
        yield name, ast.parse(source.text)


def test_no_shell_true_anywhere() -> None:
    offenders = []
    for name, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                if isinstance(node.value, ast.Constant) and node.value.value is True:
                    offenders.append(f"{name}:{node.value.lineno}")
    assert not offenders, offenders


def test_only_slurm_room_runs_slurm_commands() -> None:
    """Slurm's client commands appear as argv only in slurmlab/slurm (the sandbox starts daemons)."""
    clients = {"squeue", "sinfo", "scontrol", "salloc", "srun", "sbatch", "scancel", "sacct"}
    offenders = []
    for name, tree in _trees():
        if room_of(name) in {"slurm", "testing", "commands", "slurmlab", "cli", "demo", "__main__"}:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.List) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and first.value in clients:
                    offenders.append(f"{name}:{node.lineno} builds a {first.value} argv")
    assert not offenders, "\n".join(offenders)
