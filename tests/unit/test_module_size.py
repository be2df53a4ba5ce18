"""No module of the package over 400 lines and no function over 80, except those allowed below (issue 12).

A big module or function is split along its own sections; one that cannot be yet goes into an allow-list with
the reason beside it, so that none grows unnoticed. A lasting entry that is no longer needed fails too: take
it out, so that the module cannot grow back behind it. Entries marked BEING_SPLIT are work in progress (issue 12,
point 8, core/ and slurm/): they may drop under the limit at any time, and go when that split lands.
"""

from __future__ import annotations

import ast
from pathlib import Path

import slurmlab

PACKAGE = Path(slurmlab.__file__).resolve().parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
BEING_SPLIT = "being split (issue 12, point 8)"

# module (relative to the package) -> why it may be longer
LONG_MODULES: dict[str, str] = {}

# "module::qualified name" -> why it may be longer
LONG_FUNCTIONS: dict[str, str] = {}


def _modules() -> list[tuple[str, str]]:
    """(path relative to the package, text) of every Python module of the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("labextension/"):  # the built front end, not Python of ours
            continue
        out.append((rel, path.read_text()))
    return out


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines from its first decorator to its end) of every function, methods and nested ones
    included."""
    found: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append((name, (node.end_lineno or node.lineno) - first + 1))
            found += _functions(node, f"{name}.")
        else:
            found += _functions(node, prefix)
    return found


def long_modules() -> dict[str, int]:
    return {rel: n for rel, text in _modules() if (n := len(text.splitlines())) > MAX_MODULE_LINES}


def long_functions() -> dict[str, int]:
    return {
        f"{rel}::{name}": n
        for rel, text in _modules()
        for name, n in _functions(ast.parse(text, filename=rel))
        if n > MAX_FUNCTION_LINES
    }


def test_no_module_is_over_400_lines_unless_allowed() -> None:
    new = {rel: n for rel, n in long_modules().items() if rel not in LONG_MODULES}
    assert not new, (
        f"modules over {MAX_MODULE_LINES} lines: {new}; split each along its own sections "
        "(or, when it cannot be split yet, add it to LONG_MODULES with the reason)"
    )


def test_no_function_is_over_80_lines_unless_allowed() -> None:
    new = {key: n for key, n in long_functions().items() if key not in LONG_FUNCTIONS}
    assert not new, (
        f"functions over {MAX_FUNCTION_LINES} lines: {new}; split each along its own sections "
        "(or, when it cannot be split yet, add it to LONG_FUNCTIONS with the reason)"
    )


def test_every_lasting_entry_is_still_needed() -> None:
    lasting = {k for k, why in (LONG_MODULES | LONG_FUNCTIONS).items() if why != BEING_SPLIT}
    stale = sorted(lasting - set(long_modules()) - set(long_functions()))
    assert not stale, f"no longer over the limit, take them out of the allow-list in {Path(__file__).name}: {stale}"


def test_the_measure_sees_a_long_function_and_its_decorators() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    tree = ast.parse(f"class C:\n    @staticmethod\n    def f():\n{body.replace('    ', '        ')}\n")
    assert dict(_functions(tree)) == {"C.f": MAX_FUNCTION_LINES + 2}
