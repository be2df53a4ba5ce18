"""The environment of a command slurmlab starts from inside a Slurm job: that of a login node.

A kernel started inside a job (JupyterHub's batchspawner, Open OnDemand's batch script, a kernel started by
``salloc``) inherits the job's environment: Slurm's output variables (``SLURM_JOB_ID``, ``SLURM_GPUS``,
``SLURM_CPUS_PER_TASK``, ``SLURM_MEM_PER_CPU``, ``SLURM_NTASKS``, ``SLURM_WORKING_CLUSTER``, ...), the variables
the job was submitted with (``SBATCH_*``, ``SALLOC_*``, ``SRUN_*``) and the GPUs Slurm gave its step
(``CUDA_VISIBLE_DEVICES`` and its twins). salloc, sbatch and srun read many of these names as options (their man
pages' INPUT ENVIRONMENT VARIABLES), so a command started with them would ask for the surrounding job's resources:
``srun --jobid=N`` of a second allocation with one GPU, started under ``SLURM_GPUS=2``, fails with "Step requested
gres=gpu:2 is more than the job's gres=gpu:1".

:func:`login_environment` is what a command sees instead: the environment without every variable of those
families, as a login node has it. Families rather than a list of names, because each Slurm release adds input
variables (24.11: ``SLURM_TRES_PER_TASK``, ``SRUN_INPUT``; 26.05: ``SRUN_SEGMENT_SIZE``) and every one of them is
set by Slurm or a job script. What selects the cluster stays (:data:`KEPT`): ``SLURM_CONF`` (a configless node
points its jobs at its cached copy) and ``SLURM_CLUSTERS``; so does the reservation a session was given
(``SALLOC_RESERVATION``, ``SBATCH_RESERVATION``, ``SLURM_RESERVATION``: a workshop's hub sets them for its
students' servers), which Slurm never sets in a job itself (it writes ``SLURM_JOB_RESERVATION``). Outside a job (no ``SLURM_JOB_ID``) nothing changes:
a login node's ``SBATCH_ACCOUNT`` set by the user is the user's choice.

Wherever the kernel runs, what shapes or filters the output of the commands slurmlab reads goes too
(:data:`READER_SETTINGS`, :data:`READER_FAMILIES`): slurmlab parses what squeue, sinfo, sacct and scontrol print and
asks scancel for one job, so a user's ``SLURM_TIME_FORMAT=relative`` ("Tomorr 09:00"), ``SQUEUE_USERS``,
``SQUEUE_STATES`` or ``SCANCEL_STATE=PENDING`` from a shell's profile would make a listing unreadable, hide
records, or leave a job running that slurmlab said it cancelled.

Only a step in the session's own job (:mod:`slurmlab.slurm.own_job`) runs with the job's environment, as an
``srun`` typed in that job's shell would.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "GPU_VISIBILITY",
    "JOB_FAMILIES",
    "KEPT",
    "READER_FAMILIES",
    "READER_SETTINGS",
    "inside_job",
    "job_id_of",
    "login_environment",
]

# the variables Slurm sets in a job and those salloc, sbatch and srun read as options (every INPUT ENVIRONMENT
# VARIABLE of 22.05, 24.11 and 26.05 starts with one of these), and the PMI/PMIx wire-up of a step's tasks
JOB_FAMILIES = ("SLURM_", "SLURMD_", "SALLOC_", "SBATCH_", "SRUN_", "PMI_", "PMIX_")
# what selects the cluster, not the job: a login node has them too; and where the session's jobs go (a class's
# reservation, set by whoever started the session: Slurm's own output variable for it is SLURM_JOB_RESERVATION)
KEPT = frozenset(
    {"SLURM_CONF", "SLURM_CLUSTERS", "SALLOC_RESERVATION", "SBATCH_RESERVATION", "SLURM_RESERVATION"}
)
# the GPUs of the surrounding job's step, set by Slurm's gres/gpu plugin; a step of another job on a node with no
# GPU of Slurm's would otherwise see them
GPU_VISIBILITY = frozenset(
    {"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"}
)
# the input variables of the commands slurmlab reads (their man pages' ENVIRONMENT VARIABLES, 22.05 to 26.05):
# each is a default filter, sort, format or output length, and slurmlab gives each command the ones it means
READER_FAMILIES = ("SQUEUE_", "SINFO_", "SACCT_", "SCONTROL_", "SCANCEL_", "SPRIO_")
READER_SETTINGS = frozenset(
    {"SLURM_TIME_FORMAT", "SLURM_BITSTR_LEN", "SLURM_TOPO_LEN", "SLURM_DEBUG_FLAGS", "SLURM_CONF_OUT"}
)
# the names Slurm gives the job id of the job a process runs in (SLURM_JOBID is the old spelling, still set)
_JOB_ID_NAMES = ("SLURM_JOB_ID", "SLURM_JOBID")


def job_id_of(env: Mapping[str, str]) -> str | None:
    """The id of the job ``env`` says its process runs in, or None (not in a job, or not a job id)."""
    for name in _JOB_ID_NAMES:
        value = env.get(name, "").strip()
        if value.isascii() and value.isdigit():
            return value
    return None


def inside_job(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is that of a process inside a Slurm job (any of its job id variables is set)."""
    return any(env.get(name) for name in _JOB_ID_NAMES)


def _of_the_job(name: str) -> bool:
    if name in KEPT:
        return False
    return name in GPU_VISIBILITY or name.startswith(JOB_FAMILIES)


def _shapes_output(name: str) -> bool:
    return name in READER_SETTINGS or name.startswith(READER_FAMILIES)


def login_environment(env: Mapping[str, str], *, keep_job: bool = False) -> dict[str, str]:
    """``env`` as a login node would have it: inside a job, without the job's variables (kept with ``keep_job``,
    for a step in that very job); anywhere, without what shapes the output slurmlab reads (see the module's
    words)."""
    inside = inside_job(env) and not keep_job
    return {
        name: value
        for name, value in env.items()
        if not _shapes_output(name) and not (inside and _of_the_job(name))
    }
