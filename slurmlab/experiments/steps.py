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
``/tmp`` is not). Over SSH this process shares no filesystem with the nodes: the folder is made, watched and
removed on the cluster, under the login's home, through the runner's link (:class:`RemoteSyncFolder`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.core.framing import has_reports, read_reports
from slurmlab.core.slurm.models import Job
from slurmlab.errors import ExperimentError, SlurmlabError
from slurmlab.experiments.protocols import ExperimentAllocation, LaunchedStep
from slurmlab.experiments.workers import LocalSyncFolder

__all__ = [
    "RemoteSyncFolder",
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


# the sync folder's three operations on the cluster's side, stdlib only (the login node's python3): its folder is
# always one the first made (checked by its name), so nothing else can be listed, written or removed through them
_SYNC_FOLDER = """
import os, shutil, sys, tempfile, time
op = sys.argv[1]
root = os.path.realpath(os.path.expanduser("~/.slurmlab/sync"))
if op == "make":
    os.makedirs(root, mode=0o700, exist_ok=True)
    print(tempfile.mkdtemp(prefix="slurmlab-sync-", dir=root))
    sys.exit(0)
path = os.path.realpath(sys.argv[2])
if os.path.dirname(path) != root or not os.path.basename(path).startswith("slurmlab-sync-"):
    sys.exit("not a sync folder of slurmlab: " + sys.argv[2])
if op == "ready":
    print(sum(name.startswith("ready.") for name in os.listdir(path)))
elif op == "start":
    with open(os.path.join(path, ".t0.tmp"), "w") as f:
        f.write(str(time.time_ns() + int(float(sys.argv[3]) * 1e9)))
    os.replace(os.path.join(path, ".t0.tmp"), os.path.join(path, "t0"))
elif op == "remove":
    shutil.rmtree(path, ignore_errors=True)
"""


class RemoteSyncFolder:
    """A sync folder on the cluster (``~/.slurmlab/sync`` of the login, which the nodes share), asked through
    ``runner`` (a :class:`~slurmlab.slurm.runner.Runner` over SSH): ``t0`` is set on the cluster's clock, never
    this machine's, which may be off by more than the start margin."""

    poll_s = 0.1  # every ask is a round trip over the link, not a directory read

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        made = self._ask("make")
        self.path = made.strip().splitlines()[-1] if made.strip() else ""
        if not self.path.startswith("/"):
            raise ExperimentError(
                f"the cluster made no sync folder for the workers (python3 there printed {made[-200:]!r})",
                hint="the login node needs python3 and a writable home (~/.slurmlab/sync)",
            )

    def _ask(self, op: str, *words: str) -> str:
        argv = ["python3", "-c", _SYNC_FOLDER, op, *words]
        result = self.runner.run(argv, check=False, timeout=30)
        if result.returncode != 0:
            raise ExperimentError(
                f"the workers' sync folder on the cluster: {op} failed (exit {result.returncode}): "
                + (result.stderr or result.stdout).strip()[-300:],
                hint="check the link with %slurm; the login node needs python3 and a writable home",
            )
        return str(result.stdout)

    def ready(self) -> int:
        said = self._ask("ready", self.path).strip()
        return int(said) if said.isdigit() else 0

    def start_at(self, margin_s: float) -> None:
        self._ask("start", self.path, repr(float(margin_s)))

    def close(self) -> None:
        try:
            self._ask("remove", self.path)
        except (ExperimentError, SlurmlabError):
            pass  # a link down at the end leaves an empty folder in ~/.slurmlab/sync, not an error over results


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

    def sync_folder(self, root: str | Path | None) -> Any:
        """Where these workers meet the orchestrator (:func:`slurmlab.experiments.workers.run_workers`): on the
        cluster when the allocation's runner is over SSH (:class:`RemoteSyncFolder`), else under ``root`` here."""
        runner = self.allocation.runner
        if getattr(runner, "ssh", None) is not None:
            return RemoteSyncFolder(runner)
        return LocalSyncFolder(root)


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
    """Where the sync folder goes: None (the temp folder) on this host, else ``~/.slurmlab/sync`` (over SSH the
    launcher makes it on the cluster: :meth:`StepLauncher.sync_folder`)."""
    if getattr(allocation.runner, "ssh", None) is not None:
        return None
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
    allocation: ExperimentAllocation, node: str | None = None, python: str | None = None
) -> dict[str, Any]:
    """What a one-task step on ``node`` sees: its CPUs, the backend it would pick, its node name. ``python``:
    the nodes' Python with slurmlab (None: the one the allocation's runner names, :meth:`Runner.python`)."""
    args = ["-n1", "-N1", *(["-w", node] if node else []), *step_gpu_args(allocation.job, node)]
    python = python or allocation.runner.python()
    result = allocation.srun(
        [python, "-c", _PROBE], args=args, on_output=lambda s, ln: None, label=True, timeout=120
    )
    hint = (
        f"can the allocation's nodes run {python} with slurmlab installed? name the nodes' Python with "
        "SLURMLAB_NODE_PYTHON or %slurm use … --python PATH (python=… for this call only)"
    )
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
