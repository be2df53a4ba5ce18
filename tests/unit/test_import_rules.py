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
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "slurmlab"

# ---- the design ------------------------------------------------------------------------------------

_BASE = {"errors", "_extras"}
_CORE = {"core", "core.slurm", "core.gpu", "core.request", "core.diagnosis"}
_LIBRARY = (
    _BASE
    | _CORE
    | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets", "magics", "server", "teach"}
    | {"hub", "provisioner", "workshop"}
)

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
    # the node side runs in the allocation, on a Python that may have little more than slurmlab; of core it
    # prints through the one framing (core/framing.py; tests/unit/experiments/test_node_side.py holds it to that)
    "experiments.node": _BASE | {"core"},
    "experiments": _CORE | _BASE | {"experiments.node"},
    "sandbox": _CORE | _BASE | {"slurm"},
    "widgets": _CORE | _BASE | {"slurm", "viz"},
    "server": _CORE | _BASE | {"slurm"},
    "magics": _CORE | _BASE | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets"},
    "commands": _CORE
    | _BASE
    | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "hub", "provisioner", "workshop"},
    # the kernel provisioner (jupyter_client's entry point): kernels that run as a step inside an allocation
    "provisioner": _CORE | _BASE | {"slurm"},
    # a JupyterHub on the sandbox (batchspawner); its spawner module is imported by JupyterHub only
    "hub": _CORE | _BASE | {"slurm", "sandbox"},
    # a class on one machine: seats, the sandbox with accounting, the hub, the lessons
    "workshop": _CORE | _BASE | {"slurm", "sandbox", "hub"},
    # the teacher's helpers (public, beside the front door): what the lessons use from the rooms below
    "teach": _CORE
    | _BASE
    | {"slurm", "sandbox", "viz", "experiments", "experiments.node", "widgets", "magics"},
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
    "server": {"jupyter_server", "tornado", "traitlets"},  # traitlets: the site settings (SlurmlabServer)
    # jupyterhub: the seats' authenticator; jupyter_server, jupyter_client: the seats' kernel manager
    "hub": {"batchspawner", "traitlets", "jupyterhub", "jupyter_server", "jupyter_client"},
    "workshop": {"tornado", "jupyterhub"},  # the teacher's view: a JupyterHub service (tornado, HubOAuth)
    "provisioner": {"jupyter_client", "jupyter_core", "traitlets"},
    "testing": {"pytest"},
    "course": {"nbclient", "nbformat", "nbconvert"},
}

# core is pure: none of these, and no open()/print()/input()
IO_MODULES = {
    "os",
    "io",
    "sys",
    "pathlib",
    "subprocess",
    "socket",
    "asyncio",
    "threading",
    "shutil",
    "urllib",
    "http",
    "multiprocessing",
    "selectors",
    "signal",
    "ctypes",
    "tempfile",
    "glob",
    "fcntl",
    "select",
    "pty",
    "mmap",
    "sqlite3",
    "importlib",
    "logging",
    "time",
    "concurrent",
    "resource",
    "pwd",
    "grp",
    "platform",
    "webbrowser",
    "zipfile",
    "tarfile",
    "pickle",
    "shelve",
    "atexit",
}
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
def _scan_source(
    name: str, source: Source
) -> tuple[tuple[tuple[tuple[str, ...], int, str], ...], tuple[str, ...]]:
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
                base = ".".join(
                    parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else [])
                )
            else:
                base = node.module or ""
            # ``from a.b import c``: the module a.b.c where there is one, else a.b
            found += [((f"{base}.{alias.name}", base), node.lineno, how) for alias in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            target = _string_arg(node) if called in STRING_IMPORTERS else None
            if target:
                found.append(((target,), node.lineno, "string import"))
            if isinstance(func, ast.Name) and func.id in IO_BUILTINS:
                io_calls.append(f"line {node.lineno}: {func.id}()")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("slurmlab.")
            and id(node) not in docstrings
        ):
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
                        found.append(
                            f"{room} reaches {target_room} through " + " -> ".join(_path(parents, e.target))
                        )
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
                        how = "; ".join(
                            f"{between[a][b].module} line {between[a][b].line} imports {between[a][b].target}"
                            for a, b in zip(loop, loop[1:], strict=False)
                        )
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
    found = problems(
        _plant(slurm___planted="import json\n\n\ndef f():\n    from slurmlab.widgets import form\n")
    )
    assert (
        "line 5: slurm must not import slurmlab.widgets.form (lazy import)"
        in found["slurmlab.slurm._planted"]
    )
    # a sub-room may not reach up either, lazily or not: core.slurm is below core.request
    found = problems(_plant(core__slurm___planted="def f():\n    import slurmlab.core.request.request\n"))
    assert any(
        "must not import slurmlab.core.request.request (lazy import)" in p
        for p in found["slurmlab.core.slurm._planted"]
    )


def test_string_imports_are_caught() -> None:
    text = (
        "import importlib\n\nfrom slurmlab._extras import require\n\n"
        'LAZY = {"Form": "slurmlab.widgets.form"}\n\n\n'
        "def f():\n"
        '    importlib.import_module("slurmlab.magics")\n'
        '    require("bokeh.plotting", feature="a chart", extra="viz")\n'
        '    return __import__("IPython")\n'
    )
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
    found = problems(
        _plant(
            viz___planted="from slurmlab.core.gpu import _planted\n",
            core__gpu___planted="def f():\n    from slurmlab.slurm import runner\n",
        )
    )
    assert (
        "viz reaches slurm through slurmlab.viz._planted -> slurmlab.core.gpu._planted -> "
        "slurmlab.slurm.runner"
    ) in found["slurmlab.viz._planted"]
    assert any("must not import slurmlab.slurm.runner" in p for p in found["slurmlab.core.gpu._planted"])


def test_a_circle_between_rooms_is_caught() -> None:
    # core.request already imports core.slurm: core.slurm importing core.request closes a circle
    modules = _plant(core__slurm___planted="from slurmlab.core.request import request\n")
    circles = room_circles(modules)
    assert any(
        c.startswith("core.request -> core.slurm -> core.request")
        or c.startswith("core.slurm -> core.request -> core.slurm")
        for c in circles
    ), circles
    assert any(
        "slurmlab.core.slurm._planted line 1 imports slurmlab.core.request.request" in c for c in circles
    )


def test_a_heavy_package_outside_its_room_is_caught() -> None:
    found = problems(
        _plant(
            slurm___planted="import numpy as np\n",
            viz___planted="import bokeh\n",
            widgets___planted="def f():\n    import cupy\n",
        )
    )
    assert found["slurmlab.slurm._planted"] == ["line 1: slurm must not import the package numpy (import)"]
    assert found["slurmlab.viz._planted"] == []
    assert found["slurmlab.widgets._planted"] == [
        "line 2: widgets must not import the package cupy (lazy import)"
    ]


def test_io_in_core_is_caught() -> None:
    text = "import subprocess\nfrom pathlib import Path\n\n\ndef f():\n    return open('x').read()\n"
    found = problems(_plant(core__gpu___planted=text))["slurmlab.core.gpu._planted"]
    assert found == [
        "line 1: core is pure and must not import subprocess (import)",
        "line 2: core is pure and must not import pathlib (import)",
        "line 6: open(): core is pure and does no I/O",
    ]
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


# ---- no module circle inside a room (issue 26) ----------------------------------------------------------
# The imports that count are the ones a module makes at its top: at module level (in an ``if``, ``try``, ``with`` or
# a class body too) and under ``if TYPE_CHECKING:`` (it names the other module in the module's own signatures: the
# two are one design, whatever runs first). An import inside a function counts not: it is a use, made once every
# module is loaded (the allocation's features are imported so, by the one-line methods that reach them).

# the modules of a circle (sorted, joined by " ") -> why it is not cut yet; the list only shrinks
MODULE_CIRCLES_TO_CUT: dict[str, str] = {
    "slurmlab.core.gpu.nvlink slurmlab.core.gpu.nvlink.fabric slurmlab.core.gpu.topology": "topology builds its NVLink fabric, and fabric names GpuTopology in its signatures (TYPE_CHECKING)",
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(
    tree: ast.Module, *, type_checking: bool = True
) -> Iterator[ast.Import | ast.ImportFrom]:
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if type_checking or not _is_type_checking(node.test):
                todo.extend(node.body)
            todo.extend(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            todo.extend(
                [*node.body, *(s for h in node.handlers for s in h.body), *node.orelse, *node.finalbody]
            )
        elif isinstance(node, ast.With | ast.ClassDef):
            todo.extend(node.body)


def import_time_graph(modules: Mapping[str, Source], *, type_checking: bool = True) -> dict[str, set[str]]:
    """module -> the modules of the package it imports at its top (``type_checking``: those under
    ``if TYPE_CHECKING:`` too)."""
    graph: dict[str, set[str]] = {}
    for name, source in modules.items():
        package = name if source.is_package else name.rpartition(".")[0]
        targets = graph.setdefault(name, set())
        for node in _module_level_imports(ast.parse(source.text, filename=name), type_checking=type_checking):
            if isinstance(node, ast.Import):
                candidates = [(alias.name,) for alias in node.names]
            else:
                if node.level:
                    parts = package.split(".")
                    base = ".".join(
                        parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else [])
                    )
                else:
                    base = node.module or ""
                candidates = [(f"{base}.{alias.name}", base) for alias in node.names]
            for names in candidates:
                found = next((c for c in names if c in modules), None)
                if found is None and names[0].startswith("slurmlab."):
                    found = _own_module(names[0], modules)
                if found is not None and found in modules and found != name:
                    targets.add(found)
    return graph


def module_circles(modules: Mapping[str, Source], *, type_checking: bool = True) -> list[str]:
    """The circles of top-level imports (strongly connected components of two modules or more), each as its
    sorted modules joined by spaces."""
    graph = import_time_graph(modules, type_checking=type_checking)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[str] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the package is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(" ".join(sorted(component)))

    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(old_limit)
    return sorted(found)


def test_no_module_circle_inside_a_room() -> None:
    circles = [c for c in module_circles(_real()) if c not in MODULE_CIRCLES_TO_CUT]
    assert not circles, "modules that import each other at their top:\n" + "\n".join(circles)


def test_the_circles_left_to_cut_are_still_there() -> None:
    gone = set(MODULE_CIRCLES_TO_CUT) - set(module_circles(_real()))
    assert not gone, f"cut: take them off MODULE_CIRCLES_TO_CUT: {sorted(gone)}"


def test_a_planted_module_circle_is_caught() -> None:
    # the allocation's features name the class in their signatures and the class imports them where it uses them:
    # the class importing one at its top closes a circle
    lifecycle = _real()["slurmlab.slurm.allocation.lifecycle"].text
    assert "if TYPE_CHECKING:\n    from slurmlab.slurm.allocation.lifecycle import Allocation" in (
        _real()["slurmlab.slurm.allocation.display"].text
    )
    planted = lifecycle.replace(
        "\nimport logging\n", "\nimport logging\n\nfrom slurmlab.slurm.allocation import display\n"
    )
    assert planted != lifecycle
    modules = dict(_real())
    modules["slurmlab.slurm.allocation.lifecycle"] = Source(planted)
    assert any(
        {"slurmlab.slurm.allocation.display", "slurmlab.slurm.allocation.lifecycle"} <= set(c.split())
        for c in module_circles(modules)
    )
    # under TYPE_CHECKING on one side it is a circle still; inside a function it is not
    typed = _plant(
        slurm___a="from slurmlab.slurm import _b\n",
        slurm___b="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from slurmlab.slurm import _a\n",
    )
    assert "slurmlab.slurm._a slurmlab.slurm._b" in module_circles(typed)
    assert not [c for c in module_circles(typed, type_checking=False) if "_a" in c]
    used = _plant(
        slurm___a="from slurmlab.slurm import _b\n", slurm___b="def f():\n    from slurmlab.slurm import _a\n"
    )
    assert not [c for c in module_circles(used) if "_a" in c]


# ---- no access to another module's private attributes (issue 26) ----------------------------------------
# ``x._name`` is a foreign private access unless ``x`` is ``self``, ``cls`` or ``super()``, or ``_name`` is
# defined in the same module (a method, a class attribute, an attribute assigned as ``self._name``, a module
# name): a module may reach into its own classes' instances, never into another module's. Dunders are public.
# Names the standard library documents with a leading underscore are public too, and so is IPython's display
# protocol (``_repr_html_``, ``_repr_mimebundle_`` …).
DOCUMENTED_UNDERSCORE = {
    "_exit",
    "_getframe",
    "_replace",
    "_asdict",
    "_fields",
    "_make",
    "_field_defaults",
    "_current_frames",
}
_DISPLAY_PROTOCOL = re.compile(r"_repr_\w+_|_ipython_display_")
# module -> why it still reaches into another module's private attributes; the list only shrinks
PRIVATE_ACCESS_TO_CUT: dict[str, str] = {
    "slurmlab.commands.notebooks": "argparse has no public name for the type of add_subparsers()",
    "slurmlab.commands.sandbox": "argparse has no public name for the type of add_subparsers()",
    "slurmlab.course.execute": "nbclient's kernel clean-up after a failed start has no public method",
    "slurmlab.server.recent": "reads and resets server.poll_worker's pools (_POOLS, _settings_key)",
}


def _defined_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)  # self._name = …, also cls._name = …
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _is_own(value: ast.expr) -> bool:
    if isinstance(value, ast.Name):
        return value.id in {"self", "cls"}
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def foreign_private_access(text: str) -> list[str]:
    """``line N: x._name`` for each access to a private attribute this module does not define."""
    tree = ast.parse(text)
    own = _defined_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")):
            continue
        if (
            _is_own(node.value)
            or attr in own
            or attr in DOCUMENTED_UNDERSCORE
            or _DISPLAY_PROTOCOL.fullmatch(attr)
        ):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reaches_into_another_modules_private_attributes() -> None:
    found = {
        name: hits
        for name, source in _real().items()
        if name not in PRIVATE_ACCESS_TO_CUT and (hits := foreign_private_access(source.text))
    }
    assert not found, "\n".join(f"{name}: {'; '.join(hits)}" for name, hits in sorted(found.items()))


def test_the_private_accesses_left_to_cut_are_still_there() -> None:
    gone = [
        name
        for name in PRIVATE_ACCESS_TO_CUT
        if name not in _real() or not foreign_private_access(_real()[name].text)
    ]
    assert not gone, f"cut: take them off PRIVATE_ACCESS_TO_CUT: {gone}"


def test_a_planted_private_access_is_caught() -> None:
    text = (
        "from slurmlab.slurm.allocation import Allocation\n\n\n"
        "def f(alloc: Allocation) -> None:\n    alloc._notify()\n    alloc._cond.notify_all()\n"
    )
    assert foreign_private_access(text) == ["line 5: alloc._notify", "line 6: alloc._cond"]
    # its own class's instance, self, cls, super() and dunders are fine
    mine = (
        "class A:\n    def __init__(self) -> None:\n        self._n = 0\n\n"
        "    @classmethod\n    def make(cls) -> 'A':\n        a = cls()\n        a._n = cls._k = 1\n"
        "        return super()._x if a.__class__ else a._repr_html_()\n\n\ndef g(a: A) -> int:\n    return a._n\n"
    )
    assert foreign_private_access(mine) == []
