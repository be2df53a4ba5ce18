"""Each magic module is a leaf (issue 26, point 3): a module of ``slurmlab/magics`` that defines magics (a
``@magics_class``) imports no other such module, and the modules of ``slurmlab/magics`` import one another in
one direction only.

What the magics share is the kernel's :class:`~slurmlab.magics.session.Session`; what they do to it (find the
allocation a magic means, attach a job, the status) is :mod:`slurmlab.magics.kernel`. So ``%load_ext`` can
declare each magic module lazily and IPython imports one only when one of its magics is used. Every import
counts: at module level, inside a function, under ``TYPE_CHECKING`` and by name in a string. The package's
``__init__`` (the loader, which names every magic module for IPython) is neither a magic module nor part of a
circle by naming them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

MAGICS = Path(__file__).resolve().parents[3] / "slurmlab" / "magics"
PACKAGE = "slurmlab.magics"


def _sources() -> dict[str, str]:
    return {
        f"{PACKAGE}.{path.stem}": path.read_text()
        for path in sorted(MAGICS.glob("*.py"))
        if path.stem != "__init__"
    }


def _imported(text: str) -> Iterator[tuple[str, int]]:
    """(name, line) of everything ``text`` imports or names as a module, wherever it does."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package of slurmlab/magics
                base = f"{PACKAGE}.{base}" if base else PACKAGE
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names)
            yield base, node.lineno
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(PACKAGE + ".")
        ):
            yield node.value.split(":")[0], node.lineno


def imports_of(sources: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """module -> {module of slurmlab/magics it imports: the first line that does}."""
    out: dict[str, dict[str, int]] = {}
    for name, text in sources.items():
        found = out.setdefault(name, {})
        for target, line in _imported(text):
            if target in sources and target != name:
                found.setdefault(target, line)
    return out


def defines_magics(text: str) -> bool:
    """Whether the module holds a class decorated with IPython's ``magics_class``."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for deco in node.decorator_list:
                if (isinstance(deco, ast.Name) and deco.id == "magics_class") or (
                    isinstance(deco, ast.Attribute) and deco.attr == "magics_class"
                ):
                    return True
    return False


def leaf_problems(sources: Mapping[str, str]) -> list[str]:
    """A magic module importing another magic module, each with the line that does."""
    magic_modules = {name for name, text in sources.items() if defines_magics(text)}
    graph = imports_of(sources)
    return [
        f"{name} line {line} imports the magic module {target}"
        for name in sorted(magic_modules)
        for target, line in sorted(graph[name].items())
        if target in magic_modules
    ]


def circles(sources: Mapping[str, str]) -> list[str]:
    """Import circles among the modules of slurmlab/magics, each as ``a -> b -> a``."""
    graph = imports_of(sources)
    found: list[str] = []
    seen: set[frozenset[str]] = set()
    for start in sorted(graph):
        parents: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            here = todo.pop(0)
            for nxt in sorted(graph[here]):
                if nxt == start:
                    path = [here]
                    while (parent := parents[path[-1]]) is not None:
                        path.append(parent)
                    loop = [*reversed(path), start]
                    if frozenset(loop) not in seen:
                        seen.add(frozenset(loop))
                        found.append(" -> ".join(loop))
                    todo.clear()
                    break
                if nxt not in parents:
                    parents[nxt] = here
                    todo.append(nxt)
    return found


def test_the_magic_modules_are_found() -> None:
    magic_modules = {name for name, text in _sources().items() if defines_magics(text)}
    # the five that %load_ext declares; a new one is a leaf too
    assert {
        f"{PACKAGE}.{m}" for m in ("allocate", "steps", "status", "experiments", "accounting")
    } <= magic_modules


def test_no_magic_module_imports_another() -> None:
    problems = leaf_problems(_sources())
    assert not problems, "\n".join(problems)


def test_no_import_circle_among_the_magics_modules() -> None:
    found = circles(_sources())
    assert not found, "\n".join(found)


# ---- each kind of violation, planted beside the real modules ----------------------------------------------

_MAGIC = "from IPython.core.magic import Magics, magics_class\n\n\n@magics_class\nclass PlantedMagics(Magics):\n    pass\n"


def test_a_magic_module_importing_another_is_caught_wherever_it_imports() -> None:
    for how, text in [
        ("module level", "from slurmlab.magics.steps import StepMagics\n"),
        ("in a function", "def f():\n    from slurmlab.magics import status\n"),
        (
            "type checking",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import slurmlab.magics.allocate\n",
        ),
        ("by name", 'SPEC = "slurmlab.magics.accounting:AccountingMagics"\n'),
    ]:
        planted = {**_sources(), f"{PACKAGE}._planted": _MAGIC + text}
        found = [p for p in leaf_problems(planted) if p.startswith(f"{PACKAGE}._planted ")]
        assert len(found) == 1, (how, found)
    # a helper importing a magic module is no leaf problem (a circle, if it closes one, is caught below)
    helper = {**_sources(), f"{PACKAGE}._planted": "from slurmlab.magics.steps import StepMagics\n"}
    assert not leaf_problems(helper)


def test_a_circle_through_a_helper_is_caught() -> None:
    planted = {
        **_sources(),
        f"{PACKAGE}._planted_a": "def f():\n    from slurmlab.magics import _planted_b\n",
        f"{PACKAGE}._planted_b": "from slurmlab.magics._planted_a import f\n",
    }
    assert any(
        set(c.split(" -> ")) == {f"{PACKAGE}._planted_a", f"{PACKAGE}._planted_b"} for c in circles(planted)
    )
