"""Start experiment workers as steps of an allocation (``srun --jobid=J --overlap …``).

:class:`StepLauncher` is a launcher for :func:`slurmlab.experiments.local.run_workers`: each
worker argv becomes one step of the allocation, started with ``allocation.launch``. The
allocation is duck-typed (anything with ``launch(argv, args=[...]) -> step`` whose step has
``.proc`` and ``.stop()``, as :class:`slurmlab.slurm.allocation.Allocation` has), so this room
never imports ``slurmlab.slurm``.

Workers on other nodes meet the orchestrator in a sync folder, which must be on a filesystem
the nodes share: :func:`default_sync_root` gives the system temp folder when every step runs
on this host (a sandbox), and a folder under ``$HOME`` otherwise (home is shared on clusters,
``/tmp`` is not).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.errors import SlurmlabError

__all__ = ["StepHandle", "StepLauncher", "default_sync_root", "runs_on_this_host"]


class StepHandle:
    """One worker step, seen as a process: ``poll``, ``communicate``, ``kill`` (as Popen has).

    ``kill`` ends the step through the allocation's own ``stop`` (which signals srun so that
    Slurm ends the remote tasks) rather than SIGKILL on srun, which would orphan them.
    """

    def __init__(self, step: Any) -> None:
        self.step = step
        self.proc: subprocess.Popen[str] = step.proc
        self.argv: list[str] = list(getattr(step, "argv", []) or [])

    def poll(self) -> int | None:
        return self.proc.poll()

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        return self.proc.communicate(input, timeout=timeout)

    def kill(self) -> None:
        self.step.stop()


class StepLauncher:
    """A launcher that runs worker ``i`` as a step with ``args`` (+ ``per_worker_args[i]``).

    ``new_session`` starts each worker under ``setsid --wait`` (util-linux) so that it leads a
    session of its own on the node. ``args`` are srun options every step gets, e.g. ``["-n1", "-N1", "-w", "node1"]`` so that
    all workers land on one node; a GPU request there (``--gpus=1``) is what Slurm 22.05 needs
    for an ``--overlap`` step in a job that asked ``--gpus=N`` per job.
    """

    def __init__(
        self,
        allocation: Any,
        args: Sequence[str] = ("-n1", "-N1"),
        per_worker_args: Sequence[Sequence[str]] = (),
        *,
        overlap: bool = True,
        new_session: bool = False,
    ) -> None:
        if not callable(getattr(allocation, "launch", None)):
            raise SlurmlabError(
                f"{type(allocation).__name__} cannot start steps (it has no launch())",
                hint="pass an Allocation from slurmlab.slurm.allocation (e.g. the one %salloc made)",
            )
        self.allocation = allocation
        self.args = [str(a) for a in args]
        self.per_worker_args = [[str(a) for a in extra] for extra in per_worker_args]
        self.overlap = overlap
        self.new_session = new_session
        self.started: list[StepHandle] = []

    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[StepHandle]:
        handles: list[StepHandle] = []
        try:
            for i, argv in enumerate(argvs):
                extra = self.per_worker_args[i] if i < len(self.per_worker_args) else []
                command = list(argv)
                if self.new_session:
                    # as LocalLauncher's start_new_session: a session (so a scheduler autogroup)
                    # of its own lets the worker's --nice count against other load on the node
                    command = ["setsid", "--wait", *command]
                step = self.allocation.launch(command, args=[*self.args, *extra], overlap=self.overlap)
                handles.append(StepHandle(step))
        except BaseException:
            for h in handles:  # never leave half the workers running
                h.kill()
            raise
        self.started.extend(handles)
        return handles


def runs_on_this_host(allocation: Any) -> bool:
    """True when the allocation's nodes are this machine (the sandbox: ``NodeAddr=127.0.0.1``).

    Judged from the Slurm config the runner points at (a sandbox sets ``SLURM_CONF`` to its own
    folder) and, failing that, from the node names: a real cluster's nodes are other hosts.
    """
    runner = getattr(allocation, "runner", None)
    conf = getattr(runner, "slurm_conf", None)
    environ = getattr(runner, "environ", None)
    if not conf and callable(environ):
        conf = environ().get("SLURM_CONF")
    conf = conf or os.environ.get("SLURM_CONF")
    if conf:
        try:
            text = Path(conf).read_text()
        except OSError:
            text = ""
        if "NodeAddr=127.0.0.1" in text or "NodeAddr=localhost" in text:
            return True
    nodes = list(getattr(allocation, "nodes", []) or [])
    host = socket.gethostname().split(".")[0]
    return bool(nodes) and all(n.split(".")[0] == host for n in nodes)


def default_sync_root(allocation: Any) -> Path | None:
    """Where the sync folder goes: None (the temp folder) on this host, else ``~/.slurmlab/sync``."""
    if runs_on_this_host(allocation):
        return None
    root = Path(os.path.expanduser("~")) / ".slurmlab" / "sync"
    root.mkdir(parents=True, exist_ok=True)
    return root
