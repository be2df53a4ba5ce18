"""slurmlab's public surface, and the lessons held to it (issue 26, point 5).

Public means reachable through ``__all__``: the names in ``slurmlab.__all__``, and for each of them that is a
module (``slurmlab.viz``, ``slurmlab.teach``) the names in that module's ``__all__``. Everything else
(``slurmlab.slurm.runner``, ``slurmlab.core.gpu.mig`` …) is internal and may move. The front door's ``__all__``
is complete and sorted, every name in it resolves, ``dir()`` offers them all, and resolving none of them is
needed to ``import slurmlab`` — which loads no heavy package. The workshop lessons import public names only:
every code cell of ``notebooks/*.ipynb`` is read as the kernel reads it (IPython's magics turned into Python)
and its ``slurmlab`` imports and attribute paths are held to the public names.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import slurmlab

REPO = Path(__file__).resolve().parents[2]
LESSONS = sorted((REPO / "notebooks").glob("*.ipynb"))

# imported by `import slurmlab`, or by reading `dir()`, none of these may be: each is for one feature, loaded
# when that feature is used
HEAVY = (
    "bokeh",
    "ipywidgets",
    "cupy",
    "IPython",
    "ipykernel",
    "jupyter_server",
    "tornado",
    "numpy",
    "pynvml",
    "nbclient",
    "nbformat",
)


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter (this one has imported half the package already)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _public_modules() -> dict[str, types.ModuleType]:
    """module name -> module, for every module reachable through ``__all__`` from the front door."""
    found = {"slurmlab": slurmlab}
    todo = [slurmlab]
    while todo:
        module = todo.pop()
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType) and value.__name__ not in found:
                found[value.__name__] = value
                todo.append(value)
    return found


# ---- the front door ------------------------------------------------------------------------------------------


def test_all_is_sorted_without_duplicates() -> None:
    assert slurmlab.__all__ == sorted(set(slurmlab.__all__))


def test_all_is_complete() -> None:
    # what the front door offers: its own public names, and what it loads on first use (names and modules)
    offered = _fresh(
        "import json, types, slurmlab\n"
        "own = [n for n, v in vars(slurmlab).items() if not n.startswith('_') and not isinstance(v, types.ModuleType)]\n"
        "print(json.dumps(sorted({*own, '__version__', *slurmlab._LAZY, *slurmlab._SUBMODULES})))"
    )
    assert json.loads(offered) == slurmlab.__all__


def test_every_name_resolves_to_what_its_module_defines() -> None:
    for name in slurmlab.__all__:
        value = getattr(slurmlab, name)
        assert value is not None, name
        if name in slurmlab._LAZY:
            module = importlib.import_module(slurmlab._LAZY[name])
            assert value is getattr(module, slurmlab._RENAMED.get(name, name)), name
    assert slurmlab.timeslice is importlib.import_module("slurmlab.experiments.timeslice").run
    assert slurmlab.isolation is importlib.import_module("slurmlab.experiments.verify").verify
    with pytest.raises(AttributeError, match="has no attribute 'slurm_runner'"):
        _ = slurmlab.slurm_runner


def test_dir_offers_every_public_name_without_loading_one() -> None:
    shown = _fresh(
        "import json, sys, slurmlab, slurmlab.teach, slurmlab.viz\n"
        f"heavy = sorted(set({HEAVY!r}) & {{m.split('.')[0] for m in sys.modules}})\n"
        "print(json.dumps([dir(slurmlab), dir(slurmlab.teach), dir(slurmlab.viz), heavy]))"
    )
    front, teach, viz, heavy = json.loads(shown)
    assert set(slurmlab.__all__) <= set(front)
    assert set(slurmlab.teach.__all__) <= set(teach)
    assert set(slurmlab.viz.__all__) <= set(viz)
    assert heavy == [], f"import slurmlab (or dir()) loaded {heavy}"


def test_the_lazy_tables_and_the_type_checkers_view_agree() -> None:
    """Type checkers and editors read the ``if TYPE_CHECKING:`` imports; the interpreter reads ``_LAZY``: one
    name, one module, in both."""
    for module in (slurmlab, slurmlab.teach):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        seen: dict[str, tuple[str, str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING":
                for imp in node.body:
                    assert isinstance(imp, ast.ImportFrom) and imp.module, ast.unparse(imp)
                    for alias in imp.names:
                        seen[alias.asname or alias.name] = (imp.module, alias.name)
        lazy = {name: (mod, module._RENAMED.get(name, name)) for name, mod in module._LAZY.items()}
        lazy |= {name: (module.__name__, name) for name in getattr(module, "_SUBMODULES", ())}
        assert seen == lazy, module.__name__


def test_every_public_module_has_a_sorted_all_that_resolves() -> None:
    modules = _public_modules()
    assert sorted(modules) == ["slurmlab", "slurmlab.teach", "slurmlab.viz"]
    for module in modules.values():
        assert module.__all__ == sorted(set(module.__all__)), module.__name__
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"
    from slurmlab import teach

    assert teach.__all__ == sorted(teach._LAZY)
    for name in teach.__all__:
        assert getattr(teach, name) is getattr(importlib.import_module(teach._LAZY[name]), name), name
    with pytest.raises(AttributeError, match="slurmlab.teach"):
        _ = teach.queries


# ---- the lessons hold to it ----------------------------------------------------------------------------------


def _python_of(cell: str) -> str:
    """A cell as the kernel runs it: ``%magic`` lines and ``%%cell`` magics become calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    python: str = TransformerManager().transform_cell(cell)  # type: ignore[no-untyped-call]
    return python


def internal_uses(python: str, public: dict[str, set[str]]) -> list[str]:
    """Each use of a non-public part of slurmlab in ``python``, one line each. ``public``: public module -> its
    public names."""
    tree = ast.parse(python)
    found = []
    bound: dict[str, str] = {}  # a name the code binds -> the public module it holds
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: {p}" for p in _import(node, public, bound)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "slurmlab":
            found += [f"line {node.lineno}: {p}" for p in _import_from(node, public, bound)]
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            problem = _attribute_path(node, bound[node.value.id], parents, public)
            if problem:
                found.append(f"line {node.lineno}: {problem}")
    return found


def _import(node: ast.Import, public: dict[str, set[str]], bound: dict[str, str]) -> list[str]:
    found = []
    for alias in node.names:
        if alias.name.split(".")[0] != "slurmlab":
            continue
        if alias.name not in public:
            found.append(f"import {alias.name} (an internal module)")
        elif alias.asname:  # `import slurmlab.viz as v` binds v to slurmlab.viz
            bound[alias.asname] = alias.name
        else:  # `import slurmlab.viz` binds slurmlab
            bound["slurmlab"] = "slurmlab"
    return found


def _import_from(node: ast.ImportFrom, public: dict[str, set[str]], bound: dict[str, str]) -> list[str]:
    module = node.module or ""
    if module not in public:
        return [f"from {module} import {', '.join(a.name for a in node.names)} (an internal module)"]
    found = []
    for alias in node.names:
        if alias.name not in public[module]:
            found.append(f"from {module} import {alias.name} (not in {module}.__all__)")
        elif f"{module}.{alias.name}" in public:
            bound[alias.asname or alias.name] = f"{module}.{alias.name}"
    return found


def _attribute_path(
    node: ast.Attribute, module: str, parents: dict[ast.AST, ast.AST], public: dict[str, set[str]]
) -> str | None:
    """``slurmlab.viz.mig_figure``: each step of the path is a public name of the module before it."""
    while True:
        if node.attr not in public[module]:
            return f"{module}.{node.attr} (not in {module}.__all__)"
        module = f"{module}.{node.attr}"
        up = parents.get(node)
        if module not in public or not isinstance(up, ast.Attribute) or up.value is not node:
            return None
        node = up


def _public_names() -> dict[str, set[str]]:
    return {name: set(module.__all__) for name, module in _public_modules().items()}


def lesson_problems(path: Path) -> list[str]:
    public = _public_names()
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "code":
            found += [
                f"{path.name} cell {i}: {p}"
                for p in internal_uses(_python_of("".join(cell["source"])), public)
            ]
    return found


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_the_lesson_uses_public_names_only(path: Path) -> None:
    problems = lesson_problems(path)
    assert not problems, "a lesson uses slurmlab's internals:\n  " + "\n  ".join(problems)


def test_there_are_lessons_to_check() -> None:
    assert len(LESSONS) >= 9, LESSONS


INTERNAL = [
    (
        "from slurmlab.slurm.runner import get_runner",
        "from slurmlab.slurm.runner import get_runner (an internal",
    ),
    ("import slurmlab.core.gpu.mig as m", "import slurmlab.core.gpu.mig (an internal module)"),
    ("from slurmlab import errors", "from slurmlab import errors (not in slurmlab.__all__)"),
    ("from slurmlab.viz import notebook", "from slurmlab.viz import notebook (not in slurmlab.viz.__all__)"),
    ("import slurmlab\nslurmlab.slurm.queries.list_nodes()", "slurmlab.slurm (not in slurmlab.__all__)"),
    ("import slurmlab as sl\nx = sl.experiments.steps", "slurmlab.experiments (not in slurmlab.__all__)"),
    ("import slurmlab.viz\nslurmlab.viz.topology_view.topology_figure", "slurmlab.viz.topology_view (not in"),
    ("from slurmlab import viz\nviz.gantt.gantt_figure", "slurmlab.viz.gantt (not in slurmlab.viz.__all__)"),
    ("x = %salloc -t 5\nfrom slurmlab.slurm import queries", "from slurmlab.slurm import queries"),
]


@pytest.mark.parametrize(("cell", "said"), INTERNAL, ids=[c.splitlines()[-1][:40] for c, _ in INTERNAL])
def test_an_internal_import_or_path_in_a_cell_is_caught(cell: str, said: str) -> None:
    problems = internal_uses(_python_of(cell), _public_names())
    assert len(problems) == 1 and said in problems[0], problems


PUBLIC = [
    "%load_ext slurmlab",
    "import slurmlab\nalloc = slurmlab.Allocation.submit(['-t', '5'])\nslurmlab.get_runner().run(['sinfo'])",
    "from slurmlab import RequestError, get_runner, teach",
    "from slurmlab.teach import fmt_ns, is_mig_type\nfrom slurmlab.viz import gantt_figure",
    "import slurmlab\nslurmlab.viz.mig_figure(slurmlab.MigLayout.from_spec('H200-141GB', {0: ['7g.141gb']}))",
    "import slurmlab.teach as t\nt.probe_node",
    "import numpy as np\nnp.linalg.norm([1])",
    "%%srun -n2\nfrom slurmlab.slurm import queries",  # a cell magic's body is not Python of this kernel
]


@pytest.mark.parametrize("cell", PUBLIC, ids=range(len(PUBLIC)))
def test_public_names_pass(cell: str) -> None:
    assert internal_uses(_python_of(cell), _public_names()) == []
