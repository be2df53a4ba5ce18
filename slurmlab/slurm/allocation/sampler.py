"""Sampling a running allocation's usage in the background: ``alloc.usage()`` and the panel's live chart.

One :class:`UsageSampler` per allocation, started lazily (the first ``usage()``, or the panel showing its chart),
in a worker thread, so the kernel never waits for Slurm:

- GPU cluster: ONE overlapping step, one task per node (``srun --jobid=J --overlap -N n --ntasks-per-node=1
  --label python3 -c SAMPLER ...``, :mod:`slurmlab.core.gpu.usage_sampler`) that prints a JSON line per sample
  for this job's GPUs only; its output is read as it comes. The step ends with the allocation, when
  :meth:`UsageSampler.stop` is called (the panel going away), or at the allocation's time limit.
- the sandbox (fake GPUs) or a job without GPUs: ``sstat`` every few seconds, each reading's CPU time against
  the previous one, labelled "CPU of the job's tasks (sstat) — this machine has no GPU". Each sstat asks the
  controller: while no step runs (an idle allocation) it is asked only every ``idle_interval`` (5 min), and at
  the base interval again for a while after the allocation says a step started (``%srun``) or changed.

Nothing here raises into the kernel: what went wrong is the table's ``error``, in slurmlab's words.
"""

from __future__ import annotations

import atexit
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from slurmlab.core.framing import FrameStream
from slurmlab.core.gpu.usage import SamplerNote, UsageSample, UsageTable, cpu_samples, sampler_report
from slurmlab.core.gpu.usage_sampler import sampler_command
from slurmlab.core.slurm.sstat import SSTAT_FIELDS, SstatRecord, job_not_running, parse_sstat, sstat_problem
from slurmlab.errors import ParseError, SlurmlabError
from slurmlab.slurm.hardware_files import sandbox_hardware
from slurmlab.slurm.steps import close_quietly, end_step, split_at_newlines_only, step_argv

if TYPE_CHECKING:
    from slurmlab.slurm.allocation.lifecycle import Allocation

__all__ = ["MAX_SAMPLES", "NO_STEP_YET", "UsageSampler", "sampler_for", "sstat_argv", "usage_of"]

log = logging.getLogger(__name__)

MAX_SAMPLES = 20_000  # per allocation; the oldest go first (a day at 2 s per sample for a few GPUs)
SSTAT_TIMEOUT = 15.0
_samplers: dict[int, UsageSampler] = {}
_lock = threading.Lock()

Listener = Callable[[], None]


def sstat_argv(job_id: str) -> list[str]:
    """Every running step of the job, one parsable line each."""
    return [
        "sstat",
        "--parsable2",
        "--noheader",
        "--allsteps",
        "-j",
        job_id,
        f"--format={','.join(SSTAT_FIELDS)}",
    ]


NO_STEP_YET = "no step runs in the allocation yet: the CPU of its tasks shows here once one does (%srun ...)"


def _no_step_yet(stderr: str) -> bool:
    """sstat's "No steps running for job N": the job runs, nothing was started in it."""
    return "no steps running" in stderr.lower()


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, SlurmlabError) else f"{type(exc).__name__}: {exc}"


class UsageSampler:
    """Samples one allocation while it runs. ``table()`` is what was seen so far; listeners are called (from
    the worker thread) after each new sample or a change of note/error."""

    def __init__(
        self, alloc: Allocation, *, interval: float = 2.0, idle_interval: float | None = None
    ) -> None:
        self.alloc = alloc
        self.interval = interval
        # sstat while no step runs: an idle allocation costs the controller one call in five minutes, not thirty a
        # minute. After a start, or news from the allocation (a step started), the base interval holds for a while
        # (``eager_for``), so a step that srun is still creating is not missed.
        self.idle_interval = idle_interval if idle_interval is not None else 150 * interval
        self.eager_for = 3 * interval
        self._wake = threading.Event()
        self.source: str | None = None
        self.note: str | None = None
        self.error: str | None = None
        self._samples: list[UsageSample] = []
        self._listeners: list[Listener] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    # ---- control ---------------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> UsageSampler:
        """Start sampling (once; again after a stop) when the allocation runs."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return self
            if not self.alloc.running:
                self.note = f"the allocation is {self.alloc.state}: usage is sampled while it runs"
                return self
            self._stop.clear()
            self.error, self.note = None, "sampling started; the first samples come in a few seconds"
            self._thread = threading.Thread(
                target=self._work, name=f"slurmlab-usage-{self.alloc.job_id}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """End sampling (and the sampler step); the samples stay."""
        self._stop.set()
        self._wake.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            end_step(proc)

    def listen(self, callback: Listener) -> Callable[[], None]:
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    def table(self) -> UsageTable:
        with self._lock:
            samples = tuple(self._samples)
        return UsageTable(str(self.alloc.job_id), self.source, samples, self.note, self.error)

    # ---- the worker ------------------------------------------------------------------------------
    def _changed(self) -> None:
        for cb in list(self._listeners):
            try:
                cb()
            except Exception:
                log.exception("slurmlab: a usage listener raised")

    def _add(self, samples: list[UsageSample]) -> None:
        if not samples:
            return
        with self._lock:
            self._samples.extend(samples)
            del self._samples[:-MAX_SAMPLES]
        self.note = None
        self._changed()

    def _done(self) -> bool:
        return self._stop.is_set() or self.alloc.ended

    def _work(self) -> None:
        try:
            if self._gpu_mode():
                self._sample_gpus()
            else:
                self._sample_sstat()
        except Exception as exc:  # the table says it; never raised into the kernel
            log.debug("slurmlab: usage sampling of %s stopped", self.alloc.job_id, exc_info=True)
            self.error = _message(exc)
        if self.alloc.ended and self.error is None and not (self.note or "").startswith("sampling ended"):
            self.note = f"sampling ended with the allocation ({self.alloc.state})"
        self._changed()

    def _gpu_mode(self) -> bool:
        """GPUs Slurm gave this job, on a cluster whose GPUs are real (a sandbox's are files, not GPUs)."""
        if not any(self.alloc.gpus.values()):
            return False
        try:
            return sandbox_hardware(self.alloc.runner) is None
        except SlurmlabError:
            return False  # a sandbox, whose hardware file is broken: still no real GPU

    def _sample_sstat(self) -> None:
        self.source = "sstat"
        subscribe = getattr(self.alloc, "subscribe", None)
        unsubscribe = subscribe(lambda _alloc: self._wake.set()) if subscribe is not None else None
        try:
            self._sstat_loop()
        finally:
            if unsubscribe is not None:
                unsubscribe()

    def _sstat_loop(self) -> None:
        runner, job = self.alloc.runner, str(self.alloc.job_id)
        before: list[SstatRecord] | None = None
        t_before = 0.0
        eager_until = time.monotonic() + self.eager_for
        while not self._done():
            result = runner.run(sstat_argv(job), timeout=SSTAT_TIMEOUT, check=True)
            now = time.time()
            records = parse_sstat(result.stdout)
            problem = sstat_problem(result.stderr) if not records else None
            if problem is not None and job_not_running(result.stderr):
                self.note = f"sampling ended: {problem}"  # ended before the poller said so
                return
            if problem is not None and _no_step_yet(result.stderr):
                # the usual state of a fresh allocation (salloc starts no step): not an error of sstat's
                problem = NO_STEP_YET
            if problem is not None and problem != self.note:
                self.note = problem  # no step running yet: wait for one
                self._changed()
            if before is not None:
                self._add(cpu_samples(before, records, t_before, now))
            before, t_before = records, now
            idle = problem == NO_STEP_YET and time.monotonic() >= eager_until
            if self._wake.wait(self.idle_interval if idle else self.interval):
                self._wake.clear()  # the allocation changed (a step started): eager again
                eager_until = time.monotonic() + self.eager_for

    def _sample_gpus(self) -> None:
        alloc = self.alloc
        gpus = {node: idx for node, idx in alloc.gpus.items() if idx}
        left = alloc.time_left()
        seconds = min(left if left is not None else 86_400.0, 7 * 86_400.0) + 60
        extra = [
            "-N",
            str(len(gpus)),
            "--ntasks-per-node=1",
            "-w",
            ",".join(gpus),
            "--job-name=slurmlab-usage",
        ]
        argv = step_argv(
            str(alloc.job_id),
            # in the job this kernel runs in, beside the kernel's own step (Allocation.step_options)
            alloc.step_options(extra) if getattr(alloc, "own_job", False) else extra,
            sampler_command(self.interval, seconds, gpus),
            label=True,
            overlap=True,
        )
        self._proc = proc = alloc.runner.popen(argv, merge_stderr=True)
        split_at_newlines_only(proc)
        heard = threading.Event()
        watch = alloc.runner.watch(
            proc, argv, answered=heard.is_set
        )  # the runner's munge probe, as every step's
        said: list[str] = []
        stream = FrameStream()  # a sample of 8 GPUs passes srun's 1 KiB pieces: one task's frame spans lines
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                heard.set()
                if self._done():
                    break
                self._read_line(stream, line.rstrip("\n"), said)
        finally:
            watch.cancel()
            if proc.poll() is None:
                end_step(proc)
            close_quietly(proc.stdout)
        if watch.error is not None:
            raise watch.error  # the table's error, in the runner's words
        if self.error is None and not self._samples and not self._done():
            tail = " / ".join(said[-3:]) or f"exit {proc.returncode}"
            self.error = f"the sampler step on {', '.join(gpus)} printed no sample: {tail[-400:]}"

    def _read_line(self, stream: FrameStream, line: str, said: list[str]) -> None:
        for item in stream.feed(line):
            if item.text is not None:
                if item.text.strip():
                    said.append(item.text.strip()[:300])  # srun's own words, for the error if no sample comes
                continue
            try:
                if item.report is None:
                    raise ParseError(
                        "usage sample", item.problem or "", hint="the sampler prints framed reports"
                    )
                parsed = sampler_report(item.report)
            except SlurmlabError as exc:
                self.note = f"a garbled sample was skipped: {exc.message[:200]}"
                self._changed()
                continue
            if isinstance(parsed, SamplerNote):
                if parsed.source:
                    self.source, self.note = parsed.source, None
                if parsed.error:
                    self.error = parsed.error
                self._changed()
                continue
            self._add(parsed)


def sampler_for(alloc: Allocation) -> UsageSampler:
    """The one sampler of ``alloc`` (made, not started)."""
    with _lock:
        sampler = _samplers.get(id(alloc))
        if sampler is None or sampler.alloc is not alloc:
            sampler = _samplers[id(alloc)] = UsageSampler(alloc)
        return sampler


def usage_of(alloc: Allocation) -> UsageTable:
    """The samples so far; starts the sampler on the first call (returns at once)."""
    sampler = sampler_for(alloc)
    if not sampler.started or (not sampler.alive and sampler.error is None and alloc.running):
        sampler.start()
    return sampler.table()


@atexit.register
def _stop_all() -> None:
    """A sampler step runs in its own session: end it with the interpreter, whatever happens to the job."""
    with _lock:
        samplers = list(_samplers.values())
    for sampler in samplers:
        sampler.stop()
