"""``slurmlab notebooks DIR``: copy the workshop notebooks shipped in the package into a folder of one's own.

The wheel carries them as ``slurmlab/notebooks/*.ipynb``; a source checkout has them in ``notebooks/`` beside the
package. A file already in DIR is replaced only when it is what an earlier copy put there (recorded in
``.slurmlab-notebooks.json``) or with ``--force``: a notebook the user edited or ran is never overwritten silently.
``--student`` copies the student edition: no solutions, no instructor checks (:mod:`slurmlab.core.editions`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from slurmlab.core.editions import student_edition
from slurmlab.errors import SlurmlabError

__all__ = [
    "MANIFEST",
    "CopyPlan",
    "copy_notebooks",
    "plan_copy",
    "register",
    "shipped_notebooks",
    "student_notebooks",
]

# what an earlier copy wrote (name -> sha256): a file still matching it is ours to update
MANIFEST = ".slurmlab-notebooks.json"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "notebooks",
        help="copy the workshop notebooks into a folder",
        description="Copy the workshop notebooks that come with slurmlab into DIR (created if missing). A notebook "
        "you changed there is left alone unless you give --force.",
    )
    parser.add_argument("directory", metavar="DIR", help="where to put them, e.g. ~/slurmlab-notebooks")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks you changed in DIR")
    parser.add_argument(
        "--student",
        action="store_true",
        help="the student edition: each exercise's solution left empty, the instructor's checks left out",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    target = Path(args.directory).expanduser()
    shipped = shipped_notebooks()
    plan = copy_notebooks(student_notebooks(shipped) if args.student else shipped, target, force=args.force)
    print(plan.report(target.absolute(), args.force, student=args.student))
    return 0


def student_notebooks(notebooks: Mapping[str, bytes]) -> dict[str, bytes]:
    """The student edition of each notebook (name -> content): solutions emptied, instructor checks removed."""
    try:
        return {name: student_edition(data, name) for name, data in notebooks.items()}
    except ValueError as exc:
        raise SlurmlabError(
            str(exc), hint="copy the teacher's edition (without --student), or fix that notebook"
        ) from None


def shipped_notebooks() -> dict[str, bytes]:
    """File name -> content of the workshop notebooks in this installation (the wheel's, or a checkout's)."""
    packaged = resources.files("slurmlab").joinpath("notebooks")
    found = (
        {p.name: p.read_bytes() for p in packaged.iterdir() if p.name.endswith(".ipynb")}
        if packaged.is_dir()
        else {}
    )
    if not found:
        # an editable install or a source checkout: the package sits beside the repository's notebooks/
        source = Path(str(resources.files("slurmlab"))).parent / "notebooks"
        if source.is_dir():
            found = {p.name: p.read_bytes() for p in source.glob("*.ipynb")}
    if not found:
        raise SlurmlabError(
            "this installation of slurmlab carries no workshop notebooks",
            hint="install slurmlab from its wheel (pip install 'slurmlab[all]'), or take them from "
            "the notebooks/ folder of its repository",
        )
    return dict(sorted(found.items()))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CopyPlan:
    """What copying into a folder does to each notebook."""

    new: tuple[str, ...] = ()  # not there yet
    updated: tuple[str, ...] = ()  # there as an earlier copy left it; the shipped one differs
    same: tuple[str, ...] = ()  # already identical
    changed: tuple[str, ...] = ()  # there and different from anything slurmlab put there: the user's work

    def writes(self, force: bool) -> tuple[str, ...]:
        return self.new + self.updated + (self.changed if force else ())

    def report(self, target: Path, force: bool = False, student: bool = False) -> str:
        kept = "kept: you changed it (--force replaces it)"
        rows = (
            [(n, "new") for n in self.new]
            + [(n, "updated") for n in self.updated]
            + [(n, "overwritten (--force)" if force else kept) for n in self.changed]
            + [(n, "already there, unchanged") for n in self.same]
        )
        width = max(len(n) for n, _ in rows)
        where = shlex.quote(str(target))
        what = "workshop notebooks (student edition)" if student else "workshop notebooks"
        lines = [f"copied {len(self.writes(force))} of {len(rows)} {what} to {target}:"]
        lines += [f"  {name:<{width}}  {what}" for name, what in sorted(rows)]
        ways = [
            (f"jupyter lab {where}", "on a cluster's login node (Slurm's commands on PATH)"),
            ("make lab", "in a slurmlab checkout: a local Slurm sandbox and JupyterLab on it, in one"),
        ]
        width = max(len(cmd) for cmd, _ in ways)
        lines += [
            "open them with:",
            *(f"  {cmd:<{width}}  {what}" for cmd, what in ways),
            "in a notebook run `%load_ext slurmlab`; with no cluster, `%slurm sandbox up` starts one here",
        ]
        return "\n".join(lines)


def plan_copy(
    shipped: Mapping[str, bytes], present: Mapping[str, bytes], recorded: Mapping[str, str]
) -> CopyPlan:
    """Sort each shipped notebook by what is in the folder now (``present``) and what an earlier copy recorded."""
    new: list[str] = []
    updated: list[str] = []
    same: list[str] = []
    changed: list[str] = []
    for name, data in shipped.items():
        if name not in present:
            new.append(name)
        elif present[name] == data:
            same.append(name)
        elif recorded.get(name) == _digest(present[name]):
            updated.append(name)
        else:
            changed.append(name)
    return CopyPlan(tuple(new), tuple(updated), tuple(same), tuple(changed))


def _read_manifest(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: then every differing file counts as the user's
    files = data.get("files") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def _present(folder: Path, names: Iterable[str]) -> dict[str, bytes]:
    out = {}
    for name in names:
        path = folder / name
        if path.is_dir():
            raise SlurmlabError(
                f"{path} is a folder, where a workshop notebook would go",
                hint="copy the notebooks into another folder",
            )
        if path.exists():
            out[name] = path.read_bytes()
    return out


def copy_notebooks(
    shipped: Mapping[str, bytes], target: Path, *, force: bool = False, keep_changed: bool = False
) -> CopyPlan:
    """Copy ``shipped`` into ``target``; refuse (copying nothing) when that would overwrite a changed notebook,
    or with ``keep_changed`` copy the others and leave the changed ones as they are (``make lab`` does)."""
    if target.exists() and not target.is_dir():
        raise SlurmlabError(f"{target} is a file, not a folder", hint="give a folder: slurmlab notebooks DIR")
    try:
        target.mkdir(parents=True, exist_ok=True)
        recorded = _read_manifest(target)
        plan = plan_copy(shipped, _present(target, shipped), recorded)
        if plan.changed and not force and not keep_changed:
            names = ", ".join(plan.changed)
            verb = "differs" if len(plan.changed) == 1 else "differ"
            raise SlurmlabError(
                f"{names} in {target} {verb} from what slurmlab ships (you changed or ran it there); "
                "nothing was copied",
                hint=f"keep yours and copy into another folder, or overwrite them: "
                f"slurmlab notebooks {shlex.quote(str(target))} --force",
            )
        for name in plan.writes(force):
            (target / name).write_bytes(shipped[name])
        recorded.update(
            {name: _digest(shipped[name]) for name in shipped if name not in plan.changed or force}
        )
        (target / MANIFEST).write_text(
            json.dumps({"files": recorded}, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
    except OSError as exc:
        raise SlurmlabError(
            f"cannot write the notebooks to {target}: {exc.strerror or exc}",
            hint="choose a folder you can write to",
        ) from exc
    return plan
