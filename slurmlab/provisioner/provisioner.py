"""The kernel provisioner: a Jupyter kernel that runs as a step inside a Slurm allocation.

A kernel spec names it (``metadata.kernel_provisioner.provisioner_name = "slurmlab"``, installed by
``slurmlab kernel install``). Its life is the allocation's:

- start: the request (spec defaults, changed per kernel: :mod:`.request`) goes through the one request pipeline,
  then ``salloc --no-shell`` in the background (:meth:`Allocation.submit`, with its guardian: a killed Jupyter
  server leaves no job behind); while the job pends the start waits and says why (:attr:`status`, the log); once
  granted the kernel starts as a step on the job's first node, connected over the network (:mod:`.connection`);
- interrupt: ``scancel --signal=INT J.S`` reaches the kernel on the node;
- restart: a new step in the same allocation, unless the request changed;
- shutdown: the allocation is released; its end under a running kernel (walltime, scancel) is logged with the
  reason, and warned of before the walltime.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Any as AnyTrait
from traitlets import Float, List, Unicode

from slurmlab.core.slurm.ranges import parse_index_list
from slurmlab.core.slurm.reasons import plain_reason
from slurmlab.errors import ParseError, SlurmlabError
from slurmlab.provisioner.connection import kernel_file, read_kernel_file, read_node_step
from slurmlab.provisioner.request import (
    OVERRIDE_VARIABLE,
    KernelRequest,
    notebook_override,
    request_from_config,
    request_override,
)
from slurmlab.provisioner.status import KernelJobStatus, pending_message
from slurmlab.slurm.job_environment import login_environment

if TYPE_CHECKING:
    from jupyter_client.connect import KernelConnectionInfo

    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.runner import Runner

__all__ = ["KernelStartRefused", "SlurmProvisioner", "kernel_cpus"]

WARN_BEFORE = (600.0, 120.0)  # seconds before the walltime at which the log warns


class KernelStartRefused(RuntimeError):
    """The kernel could not start: the request was refused, the job ended before it ran, or the step failed.
    Its message is slurmlab's (what went wrong and what to do); Jupyter shows it instead of a traceback."""


class SlurmProvisioner(KernelProvisionerBase):
    """Starts the kernel as a step inside a Slurm allocation (see the module's words)."""

    # the request, from the kernel spec's provisioner config (checked by slurmlab, not by traitlets: a wrong value
    # is a message naming the field, not a TraitError)
    gpus = AnyTrait(None, allow_none=True).tag(config=True)
    gpu_type = AnyTrait(None, allow_none=True).tag(config=True)
    shards = AnyTrait(None, allow_none=True).tag(config=True)
    mig = AnyTrait(None, allow_none=True).tag(config=True)
    time = AnyTrait(None, allow_none=True).tag(config=True)
    partition = AnyTrait(None, allow_none=True).tag(config=True)
    account = AnyTrait(None, allow_none=True).tag(config=True)
    options: Any = List(Unicode(), default_value=[]).tag(config=True)
    kernel_address = Unicode(
        "", help="the address the kernel binds on the node; empty: the node's NodeAddr as Slurm knows it"
    ).tag(config=True)
    exchange_dir = Unicode(
        "",
        help="where the server and the node exchange the connection file (both must see it; empty: beside the "
        "server's connection file, in the Jupyter runtime folder)",
    ).tag(config=True)
    launch_timeout = Float(120.0, help="seconds the kernel on the node may take to bind its ports").tag(
        config=True
    )
    pending_refresh = Float(
        60.0,
        help="seconds between two readings of a pending job's expected start (its reason's change: at once)",
    ).tag(config=True)
    pending_timeout = Float(0.0, help="seconds a pending job may keep the start waiting (0: no limit)").tag(
        config=True
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._status = KernelJobStatus()
        self._status_lock = threading.Lock()
        self._alloc: Allocation | None = None
        self._alloc_request: tuple[str, ...] = ()
        self._process: subprocess.Popen[str] | None = None
        self._step: str | None = None
        self._address = ""
        self._folder: Path | None = None
        self._warned: set[float] = set()
        self._unsubscribe: Any = None
        self._last_reason: str | None = None
        self._shutting_down = False
        # the notebook jupyter_server started the kernel for (its JPY_SESSION_NAME; "" when none), for the sidebar
        self.session_name = ""

    # ---- the public status ---------------------------------------------------------------------
    @property
    def status(self) -> KernelJobStatus:
        """What the kernel's allocation is doing now (read from any thread)."""
        with self._status_lock:
            return self._status

    @property
    def allocation(self) -> Allocation | None:
        """The allocation the kernel runs in (None before it was submitted)."""
        return self._alloc

    def _set_status(self, **fields: Any) -> KernelJobStatus:
        with self._status_lock:
            self._status = replace(self._status, **fields)
            return self._status

    # ---- the request ---------------------------------------------------------------------------
    def kernel_request(self, override: dict[str, object] | None = None) -> KernelRequest:
        """The spec's request with ``override``'s fields changed (a RequestError names every wrong field)."""
        config = {
            name: getattr(self, name)
            for name in ("gpus", "gpu_type", "shards", "mig", "time", "partition", "account")
            if getattr(self, name) is not None
        }
        if self.options:
            config["options"] = list(self.options)
        request = request_from_config(config)
        return request.changed(override) if override else request

    def _notebook_request(self, env: dict[str, str], cwd: str | None) -> dict[str, object]:
        """The notebook's own request: jupyter_server names the notebook (``JPY_SESSION_NAME``, relative to its
        root) and starts the kernel in the notebook's folder (``cwd``)."""
        session = env.get("JPY_SESSION_NAME", "")
        if not session.endswith(".ipynb"):
            return {}
        path = Path(cwd or ".") / Path(session).name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            self.log.debug("slurmlab: the notebook %s was not read: %s", path, exc)
            return {}
        return notebook_override(text, str(path))

    def _runner(self) -> Runner:
        from slurmlab.slurm.runner import get_runner

        return get_runner()

    # ---- start ---------------------------------------------------------------------------------
    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        env = dict(kwargs.get("env") or os.environ)
        self._shutting_down = False
        self.session_name = env.get("JPY_SESSION_NAME", "")
        try:
            override = request_override(env.get(OVERRIDE_VARIABLE), kwargs.pop("slurm_request", None))
            if not override and not (env.get(OVERRIDE_VARIABLE) or "").strip():
                override = self._notebook_request(env, kwargs.get("cwd"))
            await self._allocation_for(self.kernel_request(override))
            command = self._kernel_command(kwargs.pop("extra_arguments", []))
        except SlurmlabError as exc:
            raise await self._refused(exc) from None
        except asyncio.CancelledError:
            await self._release()  # a start given up while the job pends leaves no job behind
            raise
        return await super().pre_launch(cmd=command, **kwargs)

    async def _refused(self, exc: SlurmlabError) -> KernelStartRefused:
        """The start failed: the job (if one was made) is released, the status and the log say why."""
        ended = self._alloc is not None and self._alloc.ended
        await self._release()
        words = f"slurmlab: the kernel did not start: {exc}"
        self._set_status(phase="ended" if ended else "refused", message=words)
        self.log.error(words)
        return KernelStartRefused(words)

    async def _allocation_for(self, request: KernelRequest) -> None:
        """An allocation running ``request``: the one the kernel had (a restart) unless the request changed."""
        from slurmlab.slurm.allocation import check_request

        tokens = tuple(request.tokens())
        alloc = self._alloc
        if alloc is not None and not alloc.ended and tokens == self._alloc_request:
            self.log.info("slurmlab: the kernel restarts in job %s", alloc.job_id)
        else:
            if alloc is not None and alloc.ended:
                self.log.info(
                    "slurmlab: job %s ended (%s): a new job is submitted for the kernel",
                    alloc.job_id,
                    alloc.state,
                )
                await self._release()
            elif alloc is not None:
                self.log.info("slurmlab: the request changed: job %s is released for a new one", alloc.job_id)
                await self._release()
            self._set_status(
                phase="checking",
                message=f"checking the request: {request.describe()}",
                request=request.describe(),
                job_id=None,
                step=None,
            )
            runner = self._runner()
            checked = await asyncio.to_thread(check_request, list(tokens), runner)
            for warning in checked.warnings:
                self.log.warning("slurmlab: %s", warning)
            alloc = await asyncio.to_thread(self._submit, checked, runner)
            self._alloc, self._alloc_request = alloc, tokens
            self._warned = set()
            self._unsubscribe = alloc.subscribe(self._on_change)
            self.log.info("slurmlab: job %s submitted for the kernel (%s)", alloc.job_id, request.describe())
        await self._until_running(alloc)

    def _submit(self, checked: Any, runner: Runner) -> Allocation:
        from slurmlab.slurm.allocation import Allocation

        return Allocation.submit(checked, runner=runner)

    async def _until_running(self, alloc: Allocation) -> None:
        """Wait for the grant, saying why the job waits each time its reason changes."""
        started = said_at = time.monotonic()
        self._last_reason = None
        while not alloc.running:
            if alloc.ended:
                raise SlurmlabError(
                    f"job {alloc.job_id} ended ({alloc.state}) before the kernel started"
                    + (f": {alloc.error}" if alloc.error else ""),
                    hint="start the kernel again, or change its request",
                )
            # Slurm's estimate moves while the reason stays: asked again now and then, one RPC each time
            stale = time.monotonic() - said_at > self.pending_refresh
            if alloc.state == "PENDING" and (alloc.reason != self._last_reason or stale):
                self._last_reason, said_at = alloc.reason, time.monotonic()
                await asyncio.to_thread(self._say_pending, alloc)
            if self.pending_timeout and time.monotonic() - started > self.pending_timeout:
                await self._release()
                raise SlurmlabError(
                    f"job {alloc.job_id} was still pending after {self.pending_timeout:g} s ({self.status.why})",
                    hint="the job was cancelled; ask for less, another partition or a shorter time",
                )
            await asyncio.sleep(0.5)
        if alloc.job is None:
            await asyncio.to_thread(alloc.refresh)
        self._set_status(
            phase="starting",
            job_id=alloc.job_id,
            nodes=tuple(alloc.nodes),
            gpus={n: tuple(i) for n, i in alloc.gpus.items()},
            reason=None,
            why="",
            expected_start=None,
            message=f"job {alloc.job_id} is running on {', '.join(alloc.nodes)}: the kernel starts there",
        )

    def _say_pending(self, alloc: Allocation) -> None:
        """The plain reason and Slurm's expected start (one ``scontrol show job``), to the log and the status."""
        try:
            alloc.refresh()
        except SlurmlabError as exc:
            self.log.debug("slurmlab: could not read job %s: %s", alloc.job_id, exc)
        job = alloc.job
        why = plain_reason(alloc.reason)
        expected = job.expected_start if job is not None else None
        message = pending_message(str(alloc.job_id), why, expected)
        before = self.status.message
        self._set_status(
            phase="pending",
            job_id=alloc.job_id,
            reason=alloc.reason,
            why=why,
            expected_start=expected,
            message=message,
        )
        if message != before:
            self.log.info("slurmlab: %s", message)

    def _kernel_command(self, extra_arguments: list[str]) -> list[str]:
        """The kernel spec's argv, its connection file the one this provisioner writes for the node."""
        from slurmlab.slurm.kernel_steps import node_address

        alloc = self._alloc
        assert alloc is not None and alloc.job_id is not None
        node = alloc.nodes[0]
        self._address = self.kernel_address or node_address(node, alloc.runner)
        folder = self._exchange_folder()
        km = self.parent
        key = km.session.key.decode() if km is not None else uuid.uuid4().hex
        scheme = km.session.signature_scheme if km is not None else "hmac-sha256"
        sent = kernel_file(
            key=key, signature_scheme=scheme, address=self._address, kernel_name=self.kernel_spec.name or ""
        )
        self._sent = sent
        _write_private(folder / "kernel.json", json.dumps(sent))
        for stale in ("step.json",):
            (folder / stale).unlink(missing_ok=True)
        argv = [a.replace("{connection_file}", str(folder / "kernel.json")) for a in self.kernel_spec.argv]
        python = argv[0] if argv else "python3"
        return [
            python,
            "-m",
            "slurmlab.provisioner.node",
            str(folder / "step.json"),
            "--",
            *argv,
            *extra_arguments,
        ]

    def _exchange_folder(self) -> Path:
        """A folder only this user may enter, fresh for each start (nothing of a previous kernel is read)."""
        base = Path(self.exchange_dir) if self.exchange_dir else _runtime_dir(self.parent)
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = base / f"slurmlab-kernel-{self.kernel_id or uuid.uuid4().hex}-{uuid.uuid4().hex[:8]}"
        self._folder.mkdir(mode=0o700)
        os.chmod(self._folder, 0o700)  # whatever the umask
        return self._folder

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        from slurmlab.slurm.kernel_steps import kernel_step_argv

        alloc = self._alloc
        assert alloc is not None and alloc.job_id is not None and self._folder is not None
        cpus = kernel_cpus(alloc)
        argv = kernel_step_argv(alloc.job_id, cpus, cmd, chdir=kwargs.get("cwd"))
        env = login_environment(kwargs.get("env") or os.environ)
        env.pop(OVERRIDE_VARIABLE, None)
        # ipykernel ends itself when the process named here is not its parent: on the node, slurmstepd is
        env.pop("JPY_PARENT_PID", None)
        self._process = alloc.runner.popen(argv, env=env, merge_stderr=True)
        self._output: list[str] = []
        threading.Thread(
            target=self._read_output, args=(self._process,), daemon=True, name="slurmlab-kernel-output"
        ).start()
        self.log.info("slurmlab: %s", " ".join(argv[:8]) + " …")
        try:
            info = await self._until_bound(alloc)
        except SlurmlabError as exc:
            await self.kill()
            raise await self._refused(exc) from None
        self.connection_info = cast("KernelConnectionInfo", info)
        self._set_status(
            phase="running",
            step=self._step,
            message=f"the kernel runs in step {self._step} of job {alloc.job_id} on {', '.join(alloc.nodes)}",
        )
        self.log.info("slurmlab: %s", self.status.message)
        return cast("KernelConnectionInfo", info)

    def _read_output(self, proc: subprocess.Popen[str]) -> None:
        """What the step prints outside the kernel's channels (srun's own messages, C libraries' output): to
        the log, and the last lines kept for the error of a kernel that did not start."""
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            self._output = [*self._output[-19:], line]
            self.log.info("slurmlab kernel: %s", line)

    async def _until_bound(self, alloc: Allocation) -> dict[str, Any]:
        folder = self._folder
        assert folder is not None and self._process is not None
        deadline = time.monotonic() + self.launch_timeout
        info = None
        while info is None:
            if self._process.poll() is not None:
                await asyncio.sleep(0.2)  # the output thread reads the last lines
                said = "\n".join(self._output[-5:])
                raise SlurmlabError(
                    f"the kernel's step in job {alloc.job_id} ended with {self._process.returncode} before it started"
                    + (f":\n{said}" if said else ""),
                    hint="see the server's log for the step's output",
                )
            if time.monotonic() > deadline:
                raise SlurmlabError(
                    f"the kernel in job {alloc.job_id} did not open its ports within {self.launch_timeout:g} s",
                    hint="is ipykernel installed on the node's Python? see the server's log",
                )
            note = read_node_step(_read(folder / "step.json"))
            if note is not None:
                self._step = note.step
            if self._step is not None:
                info = read_kernel_file(_read(folder / "kernel.json"), self._sent)
            if info is None:
                await asyncio.sleep(0.2)
        key = info["key"]
        info["key"] = key.encode() if isinstance(key, str) else key
        return info

    # ---- the allocation's news (from the poller's thread) --------------------------------------
    def _on_change(self, alloc: Allocation) -> None:
        if alloc is not self._alloc:
            return
        if alloc.ended:
            self._said_end(alloc)
            return
        left = alloc.time_left()
        if left is None:
            return
        for before in WARN_BEFORE:
            if left <= before and before not in self._warned:
                self._warned.update(b for b in WARN_BEFORE if b >= before)
                self.log.warning(
                    "slurmlab: job %s reaches its time limit in %d min: the kernel ends then; save your work",
                    alloc.job_id,
                    max(1, round(left / 60)),
                )

    def _said_end(self, alloc: Allocation) -> None:
        if self._shutting_down or self.status.phase in ("ended", "released"):
            return
        why = plain_reason(alloc.reason) if alloc.reason else ""
        message = (
            f"job {alloc.job_id} ended ({alloc.state}"
            + (f": {why}" if why else "")
            + "): the kernel ended with it"
        )
        self._set_status(phase="ended", reason=alloc.state, why=why, message=message)
        self.log.warning("slurmlab: %s", message)

    # ---- the kernel process --------------------------------------------------------------------
    @property
    def has_process(self) -> bool:
        return self._process is not None

    async def poll(self) -> int | None:
        return self._process.poll() if self._process is not None else 0

    async def wait(self) -> int | None:
        proc = self._process
        if proc is None:
            return 0
        while proc.poll() is None:
            await asyncio.sleep(0.1)
        self._process = None
        return proc.returncode

    async def send_signal(self, signum: int) -> None:
        """To the kernel on the node: ``scancel --signal`` of its step (a SIGINT to srun would not reach it)."""
        from slurmlab.slurm.kernel_steps import signal_step

        if self._process is None or self._process.poll() is not None:
            return
        if signum == 0:
            return
        if self._step is None or self._alloc is None:
            self._process.send_signal(signum)
            return
        try:
            await asyncio.to_thread(signal_step, self._step, signum, self._alloc.runner)
        except SlurmlabError as exc:
            self.log.warning("slurmlab: could not signal the kernel's step %s: %s", self._step, exc)

    async def kill(self, restart: bool = False) -> None:
        await self._end_step(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        await self._end_step(signal.SIGTERM)

    async def _end_step(self, signum: int) -> None:
        proc = self._process
        if proc is None or proc.poll() is not None:
            return
        await self.send_signal(signum)
        if signum == signal.SIGKILL:
            # srun ends once its tasks did; should the controller not answer, srun goes anyway (the step with
            # the allocation, at the latest)
            for _ in range(50):
                if proc.poll() is not None:
                    return
                await asyncio.sleep(0.1)
            proc.kill()

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        return max(recommended, 10.0)  # a step's end goes through slurmd

    def get_stable_start_time(self, recommended: float = 10.0) -> float:
        return max(recommended, 20.0)

    # ---- shutdown ------------------------------------------------------------------------------
    async def shutdown_requested(self, restart: bool = False) -> None:
        self._shutting_down = not restart

    async def cleanup(self, restart: bool = False) -> None:
        """After the kernel's end: a restart keeps the allocation (the next start runs a new step in it, unless
        the request changed); a shutdown releases it."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        self._step = None
        if not restart:
            await self._release()

    async def _release(self) -> None:
        alloc, self._alloc = self._alloc, None
        if alloc is None:
            return
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        ended = alloc.ended
        try:
            await asyncio.to_thread(alloc.cancel)
        except SlurmlabError as exc:
            self.log.warning("slurmlab: could not release job %s: %s (the guardian will)", alloc.job_id, exc)
            return
        if not ended:
            message = f"job {alloc.job_id} released: the kernel was shut down"
            self._set_status(phase="released", message=message)
            self.log.info("slurmlab: %s", message)

    async def get_provisioner_info(self) -> dict[str, Any]:
        info: dict[str, Any] = await super().get_provisioner_info()
        info["slurm_job_id"] = self._alloc.job_id if self._alloc is not None else None
        info["slurm_step"] = self._step
        return info


def _runtime_dir(km: Any) -> Path:
    connection_file = getattr(km, "connection_file", "") if km is not None else ""
    if connection_file:
        return Path(connection_file).parent
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def _write_private(path: Path, text: str) -> None:
    """Written 0600 from its creation (never readable by others, even for a moment), whole (renamed into place)."""
    partial = path.with_name(path.name + ".part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(partial, path)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def kernel_cpus(alloc: Allocation) -> int | None:
    """The CPUs the kernel's step asks for: the job's CPUs on the node it runs on, the allocation's first (where
    ``srun -N1`` starts it). Those are Slurm's own figure for that node, the count of its CPU_IDs in the job's
    detail (``scontrol show job -d``, or the JSON's ``job_resources``): a job of 3 tasks over 2 nodes holds 2 CPUs
    on one and 1 on the other, with GPUs or without. slurmlab keeps every node's CPU_IDs in
    ``Job.node_resources``, GRES or not (a job built by hand may carry them in its ``gpu_allocs`` only: read there
    next). Where the detail holds no such figure (a JSON layout may leave a node's CPU_IDs unknown) or an
    unreadable one, the job's CPUs shared evenly over its nodes, exact for one node or an even spread. None where
    the job's CPUs are not known: srun then takes Slurm's default."""
    job = alloc.job
    if job is None:
        return None
    nodes = alloc.nodes
    if nodes:
        first = job.resources_on(nodes[0]) or job.alloc_on(nodes[0])
        if first is not None and first.cpu_ids:
            try:
                return len(parse_index_list(first.cpu_ids, f"CPU_IDs of job {job.job_id} on {nodes[0]}"))
            except ParseError:
                pass  # not a list Slurm prints: the even share below, as with no figure at all
    if not job.num_cpus:
        return None
    return max(1, job.num_cpus // max(1, len(nodes)))
