"""slurmlab's small vocabulary is defined once (issue 12, point 4): a second definition fails here.

An AST scan of the package looks for the shapes a copy takes — a collection of several job-state
names, a ``[D-]HH:MM:SS`` formatter, an id-range parser, a MIG profile-name regex, a GRES item
class, a "who am I" of its own — anywhere but the one module that holds each. The scanner is tested
on copies planted in ``tmp_path`` (never in the package), so it cannot pass by seeing nothing.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from slurmlab.core.slurm import states

PKG = Path(__file__).resolve().parents[2] / "slurmlab"
TS_SRC = PKG.parent / "extensions" / "slurmlab-lab" / "src"


@dataclass(frozen=True)
class Item:
    name: str
    home: str  # the one module (relative to the package) that defines it
    find: Callable[[ast.AST], Iterator[int]]  # line numbers of definitions in one module's tree
    # modules that may hold one for a stated reason: path -> why
    exempt: tuple[tuple[str, str], ...] = ()


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    yield from ast.walk(tree)


def _strings(node: ast.AST) -> list[str]:
    elts = node.elts if isinstance(node, (ast.Set, ast.Tuple, ast.List)) else []
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def state_sets(tree: ast.AST) -> Iterator[int]:
    """A set/tuple/list literal naming three or more of Slurm's job states."""
    for node in _walk(tree):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            if len(set(_strings(node)) & states.JOB_STATES) >= 3:
                yield node.lineno


def _ints(node: ast.AST) -> set[int]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and type(n.value) is int}


def duration_formatters(tree: ast.AST) -> Iterator[int]:
    """A function that splits seconds into days and hours itself."""
    for node in _walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and {86400, 3600} <= _ints(node):
            yield node.lineno


def _is_range_to_inclusive(node: ast.AST) -> bool:
    # range(lo, hi + 1): the inclusive end of an "N-M" piece
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.BinOp)
        and isinstance(node.args[1].op, ast.Add)
        and isinstance(node.args[1].right, ast.Constant)
        and node.args[1].right.value == 1
    )


def _splits_on_comma(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "split"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == ","
    )


def range_parsers(tree: ast.AST) -> Iterator[int]:
    """A function that splits text on commas and expands ``N-M`` pieces itself."""
    for node in _walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = list(ast.walk(node))
            if any(map(_splits_on_comma, inner)) and any(map(_is_range_to_inclusive, inner)):
                yield node.lineno


_MIG_REGEX = re.compile(r"g\\\..*gb", re.IGNORECASE)


def mig_name_regexes(tree: ast.AST) -> Iterator[int]:
    """A regex source that spells a MIG profile name (``\\d+g\\.\\d+gb``)."""
    for node in _walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MIG_REGEX.search(node.value):
            yield node.lineno


def gres_item_classes(tree: ast.AST) -> Iterator[int]:
    """A class with the fields of a GRES item: name, type and count."""
    for node in _walk(tree):
        if isinstance(node, ast.ClassDef):
            fields = {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
            if {"name", "type", "count"} <= fields:
                yield node.lineno


def _is_call(node: ast.AST, module: str, func: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == func
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == module
    )


def identities(tree: ast.AST) -> Iterator[int]:
    """A "who am I" of its own: getpass (the environment's $USER, which anyone can set), the real uid,
    or the name of the effective uid looked up again."""
    for node in _walk(tree):
        if not isinstance(node, (ast.stmt, ast.expr)):
            continue
        if isinstance(node, ast.Import) and any(a.name == "getpass" for a in node.names):
            yield node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "getpass":
            yield node.lineno
        elif _is_call(node, "os", "getuid"):
            yield node.lineno
        elif (
            _is_call(node, "pwd", "getpwuid")
            and isinstance(node, ast.Call)
            and node.args
            and _is_call(node.args[0], "os", "geteuid")
        ):
            yield node.lineno


VOCABULARY = [
    Item("job-state set", "core/slurm/states.py", state_sets),
    Item("duration formatter", "core/slurm/timefmt.py", duration_formatters),
    Item(
        "id-range parser",
        "core/slurm/ranges.py",
        range_parsers,
        exempt=(
            (
                "experiments/node/worker.py",
                "runs on compute nodes, importing no room of slurmlab "
                "(experiments/node/__init__.py); CPU lists only",
            ),
        ),
    ),
    Item("MIG profile-name regex", "core/gpu/mig/layout.py", mig_name_regexes),
    Item("GRES item class", "core/slurm/gres.py", gres_item_classes),
    Item(
        "who am I",
        "slurm/identity.py",
        identities,
        exempt=(
            ("sandbox/control.py", "names the sandbox's SlurmUser in slurm.conf: whoever starts the daemons"),
            ("slurm/ssh/link.py", "getpass.getpass asks ssh's passphrase in the notebook; it never asks who"),
            (
                "slurm/ssh/holder.py",
                "runs alone on the login node, stdlib only: its own login for scancel --user",
            ),
        ),
    ),
]


def scan(root: Path) -> list[tuple[str, str, int]]:
    """(item, module relative to root, line) for every definition outside its home."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("labextension/"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for item in VOCABULARY:
            if rel == item.home or rel in dict(item.exempt):
                continue
            found += [(item.name, rel, line) for line in item.find(tree)]
    return found


def test_each_item_is_defined_once_in_its_home() -> None:
    for item in VOCABULARY:
        home = PKG / item.home
        assert home.is_file(), f"{item.name}: its home {item.home} is gone"
        for rel, why in item.exempt:
            assert (PKG / rel).is_file(), f"{item.name}: exempt {rel} ({why}) no longer exists; drop it"
    found = scan(PKG)
    assert not found, "a second definition; import it from its home instead:\n" + "\n".join(
        f"  {rel}:{line}: {name} (home: {next(i.home for i in VOCABULARY if i.name == name)})"
        for name, rel, line in found
    )


def test_the_homes_hold_what_the_scan_looks_for() -> None:
    # the scanner sees the real definitions, so it is not blind to the shape of a copy
    for item in VOCABULARY:
        if item.name == "who am I":
            continue  # identity uses os.geteuid() directly, not through pwd
        tree = ast.parse((PKG / item.home).read_text())
        assert list(item.find(tree)), f"the scan for {item.name} finds nothing in {item.home}"


PLANTED = {
    "job-state set": """
        _ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT"}
    """,
    "duration formatter": """
        def fmt(seconds):
            d, s = divmod(int(seconds), 86400)
            h, s = divmod(s, 3600)
            m, s = divmod(s, 60)
            return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"
    """,
    "id-range parser": """
        def parse_cpulist(text):
            out = set()
            for part in text.split(","):
                lo, _, hi = part.partition("-")
                out.update(range(int(lo), int(hi or lo) + 1))
            return out
    """,
    "MIG profile-name regex": """
        import re
        _MIG_TYPE = re.compile(r"^\\d+g\\.\\d+gb$", re.IGNORECASE)
    """,
    "GRES item class": """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class GresSpec:
            name: str
            type: str | None = None
            count: int | None = None
    """,
    "who am I": """
        def _me():
            import getpass

            return getpass.getuser()
    """,
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_copy_is_found(tmp_path: Path, name: str) -> None:
    planted = tmp_path / "widgets" / "planted.py"
    planted.parent.mkdir()
    planted.write_text(textwrap.dedent(PLANTED[name]))
    assert [(n, rel) for n, rel, _ in scan(tmp_path)] == [(name, "widgets/planted.py")]
    # the same text in its home is the definition, not a copy
    home = tmp_path / next(i.home for i in VOCABULARY if i.name == name)
    home.parent.mkdir(parents=True, exist_ok=True)
    planted.rename(home)
    assert scan(tmp_path) == []


def test_the_real_uid_is_another_identity(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import os, pwd\nwho = pwd.getpwuid(os.getuid()).pw_name\n"
        "me = pwd.getpwuid(os.geteuid()).pw_name\nroot = os.geteuid() == 0\n"
    )
    assert sorted(line for _, _, line in scan(tmp_path)) == [2, 3]  # a root check is no identity


def test_importing_the_vocabulary_is_no_copy(tmp_path: Path) -> None:
    (tmp_path / "uses.py").write_text(
        textwrap.dedent("""
        from slurmlab.core.gpu.mig import is_mig_type
        from slurmlab.core.slurm.ranges import parse_index_list
        from slurmlab.core.slurm.states import ENDED, HOLDING
        from slurmlab.core.slurm.timefmt import format_duration

        def left(job):
            return format_duration(job.left, clamp=True) if job.state in HOLDING else "-"

        def over(state):
            return state in ENDED or state in ("PENDING", "RUNNING")
    """)
    )
    assert scan(tmp_path) == []


def test_the_job_states_follow_slurms_list() -> None:
    assert states.ACTIVE | states.ENDED == states.JOB_STATES
    assert not states.ACTIVE & states.ENDED
    assert states.HOLDING <= states.ACTIVE and "PENDING" not in states.HOLDING
    assert {"REVOKED", "SPECIAL_EXIT", "OUT_OF_MEMORY", "DEADLINE"} <= states.ENDED
    assert {"PENDING", "REQUEUE_HOLD", "RESV_DEL_HOLD", "COMPLETING"} <= states.ACTIVE


def test_the_sidebar_keeps_one_duration_formatter() -> None:
    # the client counts down to ends_at itself (server/contract.py), with its one formatter
    files = [p.name for p in sorted(TS_SRC.glob("*.ts")) if re.search(r"\b86400\b", p.read_text())]
    assert files == ["sidebar.ts"], files
    text = (TS_SRC / "sidebar.ts").read_text()
    start = text.index("export function formatSeconds(")
    body = text[start : text.index("\n}\n", start)]
    assert text.count("86400") == body.count("86400") > 0
