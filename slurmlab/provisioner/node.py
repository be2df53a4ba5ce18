"""The launcher of a provisioned kernel, run on the node as the step's task:
``python -m slurmlab.provisioner.node NOTE -- KERNEL ARGV...``.

It writes which job, step and node it runs in to NOTE (read by the server to signal the step), then becomes the
kernel (``exec``: the same process, so the step's task is the kernel itself and a signal to the step reaches it).
Standard library only: it runs on the node's Python before anything else is imported.
"""

from __future__ import annotations

import json
import os
import sys

__all__ = ["main"]


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m slurmlab.provisioner.node NOTE -- KERNEL ARGV...", file=sys.stderr)
        return 2
    note, command = argv[0], argv[2:]
    env = os.environ
    text = json.dumps(
        {
            "job_id": env.get("SLURM_JOB_ID", ""),
            "step_id": env.get("SLURM_STEP_ID", ""),
            "node": env.get("SLURMD_NODENAME", ""),
            "pid": os.getpid(),
        }
    )
    # written beside and renamed: the server never reads half a note; 0600 like everything in the folder
    partial = f"{note}.part"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(partial, note)
    sys.stdout.flush()
    os.execvp(command[0], command)
    return 127  # pragma: no cover  (execvp does not return)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
