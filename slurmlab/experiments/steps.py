"""Start experiment workers as steps of an allocation (``srun --jobid=J --overlap …``).

:class:`StepLauncher` is a launcher for :func:`slurmlab.experiments.workers.run_workers`: each
worker argv becomes one step of the allocation, started with ``allocation.launch``. The
allocation is typed by :class:`~.protocols.ExperimentAllocation` (what
:class:`slurmlab.slurm.allocation.Allocation` offers), so this room never imports ``slurmlab.slurm``.
:func:`probe_node` asks a one-task step what the workers will find on their node, and
:func:`step_gpu_args` the GPU request every worker step repeats.

Workers on other nodes meet the orchestrator in a sync folder, which must be on a filesystem
the nodes share: :func:`default_sync_root` gives the system temp folder when every step runs
on this host (a sandbox), and a folder under ``$HOME`` otherwise (home is shared on clusters,
``/tmp`` is not).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.core.framing import has_reports, read_reports
from slurmlab.core.slurm.models import Job
from slurmlab.errors import ExperimentError, SlurmlabError
from slurmlab.experiments.protocols import ExperimentAllocation, LaunchedStep

__all__ = [
    "StepHandle",
    "StepLauncher",
    "default_sync_root",
    "probe_node",
    "runs_on_this_host",
    "step_gpu_args",
]

# the task's report in the one framing of node programs (a TaskProlog's or a shell's own lines beside it are not
# mistaken for it), read back by srun's label
_PROBE = (
    "import os, socket\n"
    "from slurmlab.core.framing import frame\n"
    "from slurmlab.experiments.node.worker import cpu_affinity, pick_backend\n"
    "print(frame({'cpus': cpu_affinity(), 'backend': pick_backend('auto'),\n"
    "             'node': os.environ.get('SLURMD_NODENAME') or socket.gethostname(),\n"
    "             'cuda_visible_devices': os.environ.get('CUDA_VISIBLE_DEVICES')}), flush=True)\n"
)


class StepHandle:
    """One worker step, seen as a process: ``poll``, ``communicate``, ``kill`` (as Popen has).

    ``kill`` ends the step through the allocation's own ``stop`` (which signals srun so that
    Slurm ends the remote tasks) rather than SIGKILL on srun, which would orphan them.
    """

    def __init__(self, step: LaunchedStep) -> None:
        self.step = step
        self.proc: subprocess.Popen[str] = step.proc
        self.argv: list[str] = list(step.argv or [])

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
        allocation: ExperimentAllocation,
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


def runs_on_this_host(allocation: ExperimentAllocation) -> bool:
    """True when the allocation's nodes are this machine (the sandbox: every ``NodeAddr`` a loopback address,
    127.0.0.1, or 127.0.1.1 where the host name resolves there).

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
            text = Path(conf).read_text(errors="replace")
        except OSError:
            text = ""
        addresses = _NODE_ADDR.findall(text)
        if addresses and all(_is_loopback(a) for a in addresses):
            return True
    nodes = list(getattr(allocation, "nodes", []) or [])
    host = socket.gethostname().split(".")[0]
    return bool(nodes) and all(n.split(".")[0] == host for n in nodes)


_NODE_ADDR = re.compile(r"^\s*NodeName=\S+.*?\bNodeAddr=(\S+)", re.MULTILINE)


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def default_sync_root(allocation: ExperimentAllocation) -> Path | None:
    """Where the sync folder goes: None (the temp folder) on this host, else ``~/.slurmlab/sync``."""
    if runs_on_this_host(allocation):
        return None
    root = Path(os.path.expanduser("~")) / ".slurmlab" / "sync"
    root.mkdir(parents=True, exist_ok=True)
    return root


def step_gpu_args(job: Job | None, node: str | None) -> list[str]:
    """The GPU request each worker step repeats so that all of them see the same GPUs.

    A job that asked GPUs per job (``--gpus=N``) must name GPUs in an ``--overlap`` step on
    Slurm 22.05; asking for all of the job's GPUs on the node keeps ``CUDA_VISIBLE_DEVICES`` (and
    so ``--device``) the same in every worker. Jobs that asked per node or per task hand the
    step their GPUs without a request. Shards and MPS are never handed over unasked: each step
    asks for the job's count (a job's shards sit on one GPU per node, so all see that GPU).
    """
    from slurmlab.core.request.step_request import step_gpu_args as build  # the one step-GPU builder

    return build(job, whole_node=True, node=node)


def probe_node(
    allocation: ExperimentAllocation, node: str | None = None, python: str = sys.executable
) -> dict[str, Any]:
    """What a one-task step on ``node`` sees: its CPUs, the backend it would pick, its node name."""
    args = ["-n1", "-N1", *(["-w", node] if node else []), *step_gpu_args(allocation.job, node)]
    result = allocation.srun(
        [python, "-c", _PROBE], args=args, on_output=lambda s, ln: None, label=True, timeout=120
    )
    hint = "can the allocation's nodes run this Python (with slurmlab installed)? pass python=… for another interpreter"
    if result.returncode != 0 or not has_reports(result.stdout):
        raise ExperimentError(
            f"the probe step in allocation {allocation.job_id} failed (exit {result.returncode}): "
            + " | ".join((result.stderr or result.stdout)[-3:]),
            hint=hint,
        )
    (probe,) = read_reports(
        result.stdout,
        1,
        stderr=result.stderr,
        what=f"the probe step in allocation {allocation.job_id}",
        hint=hint,
    )
    return dict(probe)
