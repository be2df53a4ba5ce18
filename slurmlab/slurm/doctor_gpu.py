"""The doctor's GPU-node checks: one overlapping step on a GPU node of a running job, then pure judgement.

The step (``srun --jobid=J --overlap -w NODE -N1 -n1 /bin/sh -c PROBE``) runs a small POSIX shell script that prints
sections (:mod:`slurmlab.core.gpu.smi.health` reads them): nvidia-smi's ``--query-gpu`` and ``--query-compute-apps``
CSV and its header, each under its own ``timeout`` so a hung GPU shows as a timeout instead of hanging the doctor;
the CUDA runtime the step's ``python3`` would load (cupy, the nvidia-cuda-runtime wheel or libcudart); the job's
PIDs (``scontrol listpids``); the ``/dev/nvidiaN`` files the step can open; ``CUDA_VISIBLE_DEVICES`` and
``SLURM_JOB_GPUS``. The whole step has a timeout too. :mod:`slurmlab.core.diagnosis.gpu_checks` judges it.
"""

from __future__ import annotations

import os

from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.diagnosis.gpu_checks import judge_gpu_probe, skip_all
from slurmlab.core.gpu.smi import MARK, read_probe
from slurmlab.errors import ParseError, SlurmlabError
from slurmlab.slurm.job_environment import job_id_of
from slurmlab.slurm.job_queries import job_detail
from slurmlab.slurm.own_job import inside_evidence
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.steps import StepResult, overlap_refused, step_argv, stream_step

__all__ = ["GPU_PROBE", "gpu_checks", "in_own_job"]

_QUERY = (
    "index,uuid,name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max,memory.used,memory.total,utilization.gpu,persistence_mode"
)
_APPS = "gpu_uuid,pid,used_memory,process_name"

# Learns the CUDA runtime version without touching a GPU: the pip wheels' metadata first (free), then cupy's
# runtimeGetVersion, then libcudart through ctypes. Prints one "cudart VERSION SOURCE" or "cudart not found: why".
_CUDART = r"""
import sys
from importlib import metadata
for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime"):
    try:
        v = metadata.version(dist)
    except Exception:
        continue
    print("cudart %s %s %s" % (".".join(v.split(".")[:2]), dist, v)); sys.exit(0)
def show(n, src):
    print("cudart %d.%d %s" % (n // 1000, (n % 1000) // 10, src)); sys.exit(0)
try:
    import cupy
    show(cupy.cuda.runtime.runtimeGetVersion(), "cupy " + cupy.__version__)
except Exception:
    pass
import ctypes, ctypes.util
for lib in (ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.13", "libcudart.so.12",
            "libcudart.so.11.0"):
    if not lib:
        continue
    try:
        n = ctypes.c_int()
        if ctypes.CDLL(lib).cudaRuntimeGetVersion(ctypes.byref(n)) == 0:
            show(n.value, lib)
    except Exception:
        pass
print("cudart not found: no cupy, nvidia-cuda-runtime wheel or libcudart for " + sys.executable)
"""

# $1: seconds each command may take; $2: the runtime probe. Every section ends with its command's exit status
# (124/137: timeout ended it). A hung nvidia-smi would hang every later call as long: they are skipped then.
GPU_PROBE = f"""
T="$1"; M="{MARK}"; last=0
run() {{ s="$1"; shift; echo "$M begin $s"; timeout -k 2 "$T" "$@" 2>&1; last=$?; echo "$M end $s $last"; }}
fine() {{ [ "$last" != 124 ] && [ "$last" != 137 ]; }}
if command -v nvidia-smi >/dev/null 2>&1; then
  run query-gpu nvidia-smi --query-gpu={_QUERY} --format=csv,noheader,nounits
  if fine; then run compute-apps nvidia-smi --query-compute-apps={_APPS} --format=csv,noheader,nounits; fi
  if fine; then run header nvidia-smi; fi
else
  echo "$M begin no-smi"; echo "$M end no-smi 0"
fi
echo "$M begin env"
for v in CUDA_VISIBLE_DEVICES SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_JOB_ID SLURMD_NODENAME SLURMLAB_SANDBOX; do
  x=$(printenv "$v") && echo "$v=$x"
done
echo "$M end env 0"
echo "$M begin devices"
for f in /dev/nvidia[0-9]*; do
  [ -e "$f" ] || continue
  if timeout 3 sh -c ': < "$1"' _ "$f" 2>/dev/null; then echo "$f open"; else echo "$f denied"; fi
done
echo "$M end devices 0"
run pids scontrol listpids "$SLURM_JOB_ID"
if command -v python3 >/dev/null 2>&1; then run cudart python3 -c "$2"; fi
"""


def _quiet(_stream: str, _line: str) -> None:
    return None


def _step(runner: Runner, job_id: str, node: str, timeout: float) -> StepResult:
    each = max(
        2.0, min(10.0, timeout / 4)
    )  # three nvidia-smi calls and the rest must fit in the step's timeout
    command = ["/bin/sh", "-c", GPU_PROBE, "slurmlab-doctor", f"{each:g}", _CUDART]
    extra = ["-w", node, "-N1", "-n1"]
    if in_own_job(job_id):
        # as Allocation.step_options gives every step of the job the kernel runs in: the kernel's own step
        # (batchspawner's srun) holds all of the job's memory, and srun refuses another step "Memory required
        # by task is not available"; --mem=0 shares the job's memory instead
        extra.insert(0, "--mem=0")
    result = stream_step(
        runner, step_argv(job_id, extra, command, label=False, overlap=True), _quiet, timeout
    )
    if overlap_refused(result):  # Slurm 22.05: no --overlap step in a job that asked for GPUs per task/node
        result = stream_step(
            runner, step_argv(job_id, extra, command, label=False, overlap=False), _quiet, timeout
        )
    return result


def in_own_job(job_id: str) -> bool:
    """Whether ``job_id`` is the job this process runs in: the environment names it and /proc shows this
    process inside it (:func:`slurmlab.slurm.own_job.inside_evidence`; no call to Slurm). Only the probe
    step's memory option depends on it."""
    return job_id_of(os.environ) == job_id and inside_evidence(job_id, None) is not None


def _one_skip(evidence: str, fix: str, subject: str) -> list[Finding]:
    return [Finding("gpu", "GPU-node checks", Verdict.SKIP, evidence, fix, subject)]


def gpu_checks(
    runner: Runner, job_id: str, node: str | None = None, *, timeout: float = 20.0
) -> list[Finding]:
    """The GPU-node checks on ``node`` (default: the job's first node with GPUs) of running job ``job_id``."""
    jid = str(job_id)
    try:
        job = job_detail(jid, runner)
    except SlurmlabError as exc:
        return _one_skip(
            f"job {jid} could not be read: {exc.message}",
            exc.hint or "pass --job with the id of one of your running jobs (`squeue --me`)",
            jid,
        )
    if job.state != "RUNNING":
        return _one_skip(
            f"job {jid} is {job.state}: the GPU checks need a running job",
            "pass --job with a running job that holds GPUs (`squeue --me -t R`)",
            jid,
        )
    by_node = job.gpus_by_node()
    if not by_node:
        return _one_skip(
            f"job {jid} holds no GPUs", "pass --job with a job that asked for GPUs (--gpus=1)", jid
        )
    if node is None:
        node = next(iter(by_node))
    elif node not in by_node:
        return _one_skip(
            f"job {jid} holds no GPUs on {node} (it has GPUs on {', '.join(by_node)})",
            f"pass --node with one of: {', '.join(by_node)}",
            f"job {jid}",
        )
    subject = f"job {jid} on {node}"
    result = _step(runner, jid, node, timeout)
    if not any(line.startswith(MARK) for line in result.stdout):
        said = " / ".join(ln.strip() for ln in result.stderr if ln.strip())[-300:] or "no output"
        why = (
            f"timed out after {timeout:g} s" if result.interrupted else f"exit {result.returncode}"
        ) + f": {said}"
        return skip_all(
            f"the probe step could not run on {node} ({why})",
            subject,
            "check that the job still runs and that `srun --jobid=J --overlap hostname` works",
        )
    try:
        probe = read_probe("\n".join(result.stdout))
    except ParseError as exc:
        return skip_all(f"the probe's output could not be read: {exc.message}", subject)
    return judge_gpu_probe(probe, subject, by_node[node])
