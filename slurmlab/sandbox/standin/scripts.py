"""The stand-in tools a sandbox puts on its nodes (pure: the texts of the files; :mod:`slurmlab.sandbox.folder`
writes them).

``<sandbox>/bin/nvidia-smi`` answers from the sandbox's hardware file (see :mod:`.nvidia_smi` and its data side,
copied in: the nodes' ``python3`` may not have slurmlab).

How it gets on a step's PATH, on every Slurm the sandbox runs (22.05, 24.11, 26.05):

- slurm.conf's ``TaskProlog`` (``<sandbox>/bin/task-prolog``) prints ``export PATH=<sandbox>/bin:…`` and
  ``export SLURMLAB_SANDBOX=<sandbox>``: every task's environment then has them, so a program the task starts
  finds the stand-in (``srun sh -c nvidia-smi``), and a check can tell it runs in a sandbox.
- slurmstepd looks up a step's own command (``srun nvidia-smi``) in the PATH srun sent, before the TaskProlog runs
  (seen on 22.05: ``execve(): nvidia-smi: No such file or directory`` with the prolog in place). So whoever runs
  srun against a sandbox puts its ``bin`` first on srun's PATH: slurmlab's Runner does, for a ``SLURM_CONF`` that
  has the hardware file beside it (:func:`slurmlab.slurm.hardware_files.standin_path`).
"""

from __future__ import annotations

import ast
import shlex
from importlib import resources

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.gpu.sandbox_limits import SANDBOX_ENV
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.errors import SandboxError

__all__ = ["STANDIN_DIR", "TASK_PROLOG", "nvidia_smi_script", "task_prolog_script"]

STANDIN_DIR = "bin"  # beside slurm.conf
TASK_PROLOG = f"{STANDIN_DIR}/task-prolog"

# what runs the rendering: it reads the hardware file beside the bin folder and the step's environment
_MAIN = f'''

def _main(argv):
    import json
    import os
    import sys
    import time

    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    path = os.path.join(here, {HARDWARE_FILE!r})
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"{STANDIN_MARK}: cannot read the sandbox's hardware file {{path}}: {{exc}}", file=sys.stderr)
        return 9
    out, err, rc = answer(argv, doc, dict(os.environ), time.strftime("%a %b %d %H:%M:%S %Y"))
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc


if __name__ == "__main__":
    raise SystemExit(_main(__import__("sys").argv[1:]))
'''


# what bin/nvidia-smi holds, in this order (package, file): the names shared with slurmlab's readers, the NVLink
# table `nvlink -s` answers from, the stand-in's data side, then its rendering; each standard library only but for
# its imports of the ones before it, which the script leaves out (their names are defined above them there)
_PARTS = (
    ("slurmlab.core.gpu", "standin_names.py"),
    ("slurmlab.core.gpu.nvlink", "models.py"),
    ("slurmlab.sandbox.standin", "devices.py"),
    ("slurmlab.sandbox.standin", "nvidia_smi.py"),
)


def _without_imports(name: str, text: str) -> str:
    """A part's text without its ``__future__`` import (the script opens with it) and its imports of slurmlab."""
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise SandboxError(
            f"slurmlab's {name} cannot be read: {exc}",
            hint="reinstall slurmlab: the sandbox's stand-in nvidia-smi is built from it",
        ) from exc
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (
            node.module == "__future__" or (node.module or "").split(".")[0] == "slurmlab"
        ):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return "".join(line for i, line in enumerate(text.splitlines(keepends=True), 1) if i not in drop)


def nvidia_smi_script() -> str:
    """The text of ``bin/nvidia-smi``: the names the stand-in shares with slurmlab's readers, slurmlab's NVLink
    table, the stand-in's data side and its rendering (each without its imports of the others), and a main that
    feeds them the hardware file and the environment."""
    parts = [
        _without_imports(name, (resources.files(package) / name).read_text(encoding="utf-8"))
        for package, name in _PARTS
    ]
    return (
        "#!/usr/bin/env python3\n# "
        + STANDIN_MARK
        + ": written by slurmlab when the sandbox started\n"
        + "from __future__ import annotations\n"
        + "\n".join(parts)
        + _MAIN
    )


def task_prolog_script(folder: str) -> str:
    """The text of ``bin/task-prolog``: the exports slurmstepd applies to every task of the sandbox."""
    bin_dir = f"{folder}/{STANDIN_DIR}"
    return (
        "#!/bin/sh\n"
        f"# {STANDIN_MARK}: puts the sandbox's stand-in tools (nvidia-smi) first on every task's PATH\n"
        f'case ":$PATH:" in *:{shlex.quote(bin_dir)}:*) ;; *) PATH={shlex.quote(bin_dir)}:$PATH ;; esac\n'
        "printf 'export PATH=%s\\n' \"$PATH\"\n"
        f"printf 'export {SANDBOX_ENV}=%s\\n' {shlex.quote(folder)}\n"
    )
