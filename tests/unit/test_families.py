"""Families are packages, a package's ``__init__`` is its one re-exporter, and colours come from one palette
(issue 26, point 4).

- A family of modules (``binding.py`` beside ``binding_evidence.py``, ``binding_table.py`` …) is a package
  (``binding/evidence.py`` …): a head module or package with two or more ``<head>_*.py`` siblings is a family.
- Only a package's ``__init__`` re-exports: a module whose ``__all__`` names what it imports instead of defining
  it hands out another module's names, and its callers should import them from their home or the package.
- A colour is written once, in :mod:`slurmlab.core.palette`: a hex colour in any other module's code is a second
  palette.

Each rule holds for the whole package except the modules named below, left to the other parts of issue 26 (the
allocation and what is being edited beside it) or not yet cut; the lists only take modules out. The checks read the sources, so the tests
that plant a violation run them on a copy of the package with one file added.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import slurmlab

PACKAGE = Path(slurmlab.__file__).resolve().parent

# folder/head (relative to the package) -> why the family is not a package yet
FAMILIES_TO_CUT: dict[str, str] = {
    "slurm/doctor": "doctor_evidence, doctor_gpu: being edited beside point 2's work; not cut in point 4",
    "widgets/panel": "panel_ended, panel_usage, panel_why: being edited beside point 2's work; not cut in point 4",
}
# module (relative to the package) -> what its __all__ still hands out from other modules
REEXPORTS_TO_CUT: dict[str, str] = {
    "core/request/request.py": "the request's parts (GpuCount, Memory, GresSpec …)",
    "core/request/validate.py": "check_inventory",
    "core/slurm/gres.py": "parse_index_list, render_index_list",
    "core/slurm/models.py": "ExitStatus, GresAlloc, Tres, parse_mem_mb",
    "core/slurm/parse_json.py": "JSONRecord, NodeShape and the JSON parsers",
    "core/slurm/parse_text.py": "Record, parse_records",
    "experiments/timeslice.py": "TimeslicePlan",
    "sandbox/control.py": "APT_INSTALL, SandboxStatus, default_directory, detect_release, detect_version",
    "sandbox/render.py": "HARDWARE_FILE",
    "server/data.py": "the job and node views",
    "slurm/poller.py": "node_trouble",
    "slurm/queries.py": "every query of the slurm room (it defines nothing)",
    "slurm/runner.py": "the munge probe and the failure classifier",
    "testing/fake_runner.py": "the goldens' helpers",
    "widgets/form.py": "is_mig_type",
    "widgets/rows.py": "plain_reason",
}
# module (relative to the package) -> why it still writes its own colours
COLOURS_TO_CUT: dict[str, str] = {
    "widgets/panel.py": "being edited beside point 2's work; its colours are the palette's values (OK, FAILED …)",
    "widgets/panel_ended.py": "as widgets/panel.py",
    "widgets/panel_usage.py": "as widgets/panel.py",
    "widgets/panel_why.py": "as widgets/panel.py",
}
PALETTE_MODULE = "core/palette.py"
# a colour, not an issue number (nccl-tests#300)
_HEX_COLOUR = re.compile(r"(?<![\w-])#(?:[0-9A-Fa-f]{6}|[0-9A-Fa-f]{3})\b")


def _modules(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.py") if "labextension" not in p.parts and "__pycache__" not in p.parts
    )


def families(root: Path = PACKAGE) -> dict[str, list[str]]:
    """folder/head -> the ``<head>_*`` modules beside a module or package ``head`` that has two or more."""
    found: dict[str, list[str]] = {}
    for folder in sorted({p.parent for p in _modules(root)}):
        modules = {p.stem for p in folder.glob("*.py")}
        heads = modules | {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        for head in sorted(heads):
            members = sorted(m for m in modules if m.startswith(head + "_"))
            if len(members) >= 2:
                found[(folder / head).relative_to(root).as_posix()] = members
    return found


def _top_level_names(tree: ast.Module) -> tuple[list[str], set[str], set[str]]:
    """A module's ``__all__``, the names it defines and the names it imports with ``from … import``."""
    listed: list[str] = []
    defined: set[str] = set()
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in (t.id for t in targets if isinstance(t, ast.Name)):
                if target == "__all__" and isinstance(node.value, ast.List):
                    listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                else:
                    defined.add(target)
        elif isinstance(node, ast.ImportFrom):
            imported |= {alias.asname or alias.name for alias in node.names}
    return listed, defined, imported


def reexports(root: Path = PACKAGE) -> dict[str, list[str]]:
    """module -> the names its ``__all__`` lists that it imports rather than defines (``__init__`` left out)."""
    found: dict[str, list[str]] = {}
    for path in _modules(root):
        if path.name == "__init__.py":
            continue
        listed, defined, imported = _top_level_names(ast.parse(path.read_text(encoding="utf-8")))
        names = [name for name in listed if name in imported and name not in defined]
        if names:
            found[path.relative_to(root).as_posix()] = names
    return found


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def colours(root: Path = PACKAGE) -> dict[str, list[str]]:
    """module -> the hex colours its code writes (in strings, docstrings left out), the palette left out."""
    found: dict[str, list[str]] = {}
    for path in _modules(root):
        rel = path.relative_to(root).as_posix()
        if rel == PALETTE_MODULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        written = [
            f"line {node.lineno}: {hit}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for hit in _HEX_COLOUR.findall(node.value)
        ]
        if written:
            found[rel] = written
    return found


def stale(allowed: dict[str, str], found: dict[str, list[str]]) -> list[str]:
    """The entries of an allow-list that no longer offend: the list must shrink with the code, or it would
    quietly let the module offend again later."""
    return sorted(entry for entry in allowed if entry not in found)


def _stale_words(list_name: str, entries: list[str]) -> str:
    return f"{list_name} lists {entries}, which no longer offend: take them out of the list"


# ---- the package as it is ------------------------------------------------------------------------------


def test_every_family_is_a_package() -> None:
    every = families()
    assert not stale(FAMILIES_TO_CUT, every), _stale_words("FAMILIES_TO_CUT", stale(FAMILIES_TO_CUT, every))
    found = {head: members for head, members in every.items() if head not in FAMILIES_TO_CUT}
    assert not found, "\n".join(
        f"{head}: {', '.join(members)} (make {head}/ a package)" for head, members in found.items()
    )


def test_only_a_package_init_re_exports() -> None:
    every = reexports()
    assert not stale(REEXPORTS_TO_CUT, every), _stale_words(
        "REEXPORTS_TO_CUT", stale(REEXPORTS_TO_CUT, every)
    )
    found = {module: names for module, names in every.items() if module not in REEXPORTS_TO_CUT}
    assert not found, "\n".join(
        f"{module} hands out {names}: import them from their own module or package"
        for module, names in found.items()
    )


def test_colours_come_from_the_one_palette() -> None:
    every = colours()
    assert not stale(COLOURS_TO_CUT, every), _stale_words("COLOURS_TO_CUT", stale(COLOURS_TO_CUT, every))
    found = {module: hits for module, hits in every.items() if module not in COLOURS_TO_CUT}
    assert not found, "\n".join(
        f"{module}: {hits} (name it in slurmlab/core/palette.py)" for module, hits in found.items()
    )


def test_the_gpu_room_and_the_stand_in_follow_all_three_with_no_exception() -> None:
    # the families of point 4 (binding, mig, smi, placement, nvlink) and the stand-in nvidia-smi beside the sandbox
    for listed in (FAMILIES_TO_CUT, REEXPORTS_TO_CUT, COLOURS_TO_CUT):
        assert not [m for m in listed if m.startswith(("core/gpu", "sandbox/standin", "viz/"))], listed
    assert not (PACKAGE / "core" / "gpu" / "smi_standin.py").exists()
    assert (PACKAGE / "sandbox" / "standin" / "nvidia_smi.py").is_file()


# ---- each rule catches a planted violation ---------------------------------------------------------------


def _copy_with(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "slurmlab"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "labextension", "*.ipynb"))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_family_is_caught(tmp_path: Path) -> None:
    root = _copy_with(
        tmp_path, {"core/gpu/widget_a.py": "", "core/gpu/widget_b.py": "", "core/gpu/widget.py": ""}
    )
    assert families(root)["core/gpu/widget"] == ["widget_a", "widget_b"]
    # one prefixed sibling is a pair, not a family (topology.py beside topology_profile.py)
    assert "core/gpu/topology" not in families(root)


def test_a_planted_re_export_is_caught(tmp_path: Path) -> None:
    text = (
        'from slurmlab.core.gpu.topology import Topology\n\n__all__ = ["Topology", "f"]\n\n\n'
        "def f() -> None:\n    pass\n"
    )
    root = _copy_with(tmp_path, {"core/gpu/planted.py": text, "core/gpu/planted_pkg/__init__.py": text})
    found = reexports(root)
    assert found["core/gpu/planted.py"] == ["Topology"]
    assert not any(m.startswith("core/gpu/planted_pkg") for m in found)  # a package's __init__ may


def test_a_planted_colour_is_caught(tmp_path: Path) -> None:
    text = '"""Drawn in #FFFFFF, says the docstring."""\n\nRED = "#d62728"\nCSS = "p { color: #777; }"\n'
    root = _copy_with(tmp_path, {"viz/planted.py": text})
    assert colours(root)["viz/planted.py"] == ["line 3: #d62728", "line 4: #777"]


def test_an_allowed_module_that_no_longer_offends_is_caught(tmp_path: Path) -> None:
    # cut in the copy: slurm/poller.py re-exports nothing any more, widgets/panel_ended.py and panel_usage.py
    # write no colour, so their allow-list entries are stale there (and only those)
    root = _copy_with(
        tmp_path,
        {
            "slurm/poller.py": '__all__ = ["f"]\n\n\ndef f() -> None:\n    pass\n',
            "widgets/panel_ended.py": "",
            "widgets/panel_usage.py": "",
        },
    )
    assert stale(REEXPORTS_TO_CUT, reexports(root)) == ["slurm/poller.py"]
    assert stale(COLOURS_TO_CUT, colours(root)) == ["widgets/panel_ended.py", "widgets/panel_usage.py"]
    # a family left with one prefixed sibling is no family: its entry is stale
    (root / "widgets" / "panel_why.py").unlink()
    (root / "widgets" / "panel_usage.py").unlink()
    assert stale(FAMILIES_TO_CUT, families(root)) == ["widgets/panel"]
