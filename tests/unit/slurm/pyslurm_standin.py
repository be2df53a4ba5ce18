"""A stand-in for the ``pyslurm`` module, built from pyslurm 25.11.2's source, to test slurmlab's pyslurm backend.

pyslurm 25.11 builds only against Slurm 25.11's headers and library, which this project's sandbox does not
have, so the backend is tested against this module instead. Nothing of pyslurm is guessed: every class,
attribute name, value type and conversion is taken from its source, read at

    PySlurm/pyslurm tag v25.11.2, commit b76f1867e5256edf3e8c4cd467edf99d79e46988; the same files as PyPI's
    pyslurm-25.11.2.tar.gz (sha256 6e0e4bc639ea3177591b102b77c1dd8df55a9e411ac42ef339a4adb3908cca34):
      pyslurm/__init__.py          what the package exports (Job, Jobs, RPCError, PyslurmError, __version__)
      pyslurm/core/job/job.pyx     Job.load, Jobs.load, Job's properties (JOB_ATTRIBUTES is their full list)
      pyslurm/core/job/job.pxd     Job's C-level attributes: ptr, passwd, groups; public steps, stats, pids
      pyslurm/core/error.pyx       RPCError(errno, msg): msg is slurm_strerror(errno)
      pyslurm/utils/cstr.pyx       to_unicode, to_gres_dict (its c_string_encoding=default makes Cython decode
                                   every char* as UTF-8, strictly: a byte that is not UTF-8 raises)
      pyslurm/utils/ctime.pyx      _raw_time
      pyslurm/utils/uint.pyx       u32_parse (pyslurm/constants.py: UNLIMITED = "UNLIMITED")
      pyslurm/utils/helpers.pyx    uid_to_name
      pyslurm/slurm/helpers.pxi    IS_JOB_PENDING / RUNNING / SUSPENDED
      pyslurm/xcollections.pyx     MultiClusterMap.values(): every job of every cluster

and, for what libslurm puts in the job record (``slurm_job_info_t``) and its error texts, SchedMD/slurm tag
slurm-25-11-7-1: slurm/slurm.h (NO_VAL, INFINITE, job_states and their flags), slurm/slurm_errno.h and
src/common/slurm_errno.c (error numbers and words), src/common/slurm_protocol_defs.c (job_state_string).

The functions below keep pyslurm's names and logic (Cython turned into Python). ``Job`` has ``__slots__`` like
the cdef class it stands for, and answers only the names in JOB_ATTRIBUTES: a name pyslurm does not have
raises AttributeError, as pyslurm itself would; a name it has but this stand-in does not model raises
AttributeError saying so (add it here from job.pyx, never from memory).
"""

from __future__ import annotations

import pwd
import re
import time
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

VERSION = "25.11.2"
SOURCE = "PySlurm/pyslurm v25.11.2 (commit b76f1867e5256edf3e8c4cd467edf99d79e46988)"

# The public names of pyslurm 25.11.2's Job: every `def` of `cdef class Job` in pyslurm/core/job/job.pyx
# (properties and methods) plus the `cdef public` attributes of job.pxd (steps, stats, pids). There is no `nodes`.
JOB_ATTRIBUTES = frozenset(
    """
account accrue_time admin_comment allocated_licenses allocated_nodes allocated_tres array_id array_task_id
array_tasks_parallel array_tasks_waiting as_dict association_id batch_constraints batch_host billable_tres
boards_per_node burst_buffer burst_buffer_state cancel cluster cluster_constraints command comment
consolidate_segments constraints container container_id cores_per_socket cores_reserved_for_system
cpu_frequency_governor cpu_frequency_max cpu_frequency_min cpus cpus_per_gpu cpus_per_task cronjob_time deadline
delay_boot_time dependencies derived_exit_code derived_exit_code_signal elapsed_cpu_time eligible_time end_time
excluded_nodes exit_code exit_code_signal extra failed_node federation_origin federation_siblings_active
federation_siblings_viable get_batch_script get_resource_layout_per_node gpus gres gres_binding gres_per_node
gres_tasks_per_sharing group_id group_name heterogeneous_id heterogeneous_offset hold id is_batch_job is_cronjob
is_requeueable kill_on_invalid_dependency kill_step_when_oom last_sched_evaluation_time licenses load load_stats
mail_types mail_user max_nodes max_wait_time_switches mcs_label memory memory_per_cpu memory_per_gpu
memory_per_node min_cpus_per_node modify name network nice notify ntasks ntasks_per_board ntasks_per_core
ntasks_per_gpu ntasks_per_node ntasks_per_socket num_nodes partition pre_suspension_time preempt_eligible_time
preempt_time preferred_features priority profile_types qos release requested_tres requeue requeue_count
required_nodes required_switches requires_contiguous_nodes requires_node_reboot reservation reserved_ports
resize_time resource_sharing run_time run_time_remaining scheduled_nodes segment_size selinux_context
send_signal slurm_protocol_version sockets_per_board sockets_per_node spread_segments spreads_over_nodes
standard_error standard_input standard_output start_time state state_reason submit_host submit_line
submit_session_id submit_time suspend suspend_time system_comment temporary_disk_per_node threads_per_core
threads_reserved_for_system time_limit time_limit_min to_dict tres tres_per_job tres_per_node tres_per_socket
tres_per_task unsuspend user_id user_name wckey working_directory
steps stats pids
""".split()
)
# what pyslurm/__init__.py exports that this stand-in provides
MODULE_ATTRIBUTES = frozenset({"__version__", "Job", "Jobs", "RPCError", "PyslurmError"})

# ---- Slurm's side (slurm.h, slurm_errno.h, slurm_errno.c, job_state_string) ----------------------------------
NO_VAL = 0xFFFFFFFE
INFINITE = 0xFFFFFFFF
JOB_STATE_BASE = 0x000000FF
BASE_STATES = (
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)  # enum job_states, as job_state_string names them
# the flags job_state_string reports, in the order it tests them
STATE_FLAGS = (
    ("COMPLETING", 1 << 15),
    ("STAGE_OUT", 1 << 23),
    ("CONFIGURING", 1 << 14),
    ("EXPEDITING", 1 << 24),
    ("RESIZING", 1 << 13),
    ("REQUEUED", 1 << 10),
    ("REQUEUE_FED", 1 << 20),
    ("REQUEUE_HOLD", 1 << 11),
    ("SPECIAL_EXIT", 1 << 12),
    ("STOPPED", 1 << 16),
    ("REVOKED", 1 << 19),
    ("RESV_DEL_HOLD", 1 << 21),
    ("SIGNALING", 1 << 22),
)
SLURM_ERROR = -1
SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR = 1800
ESLURM_INVALID_JOB_ID = 2017
STRERROR = {
    SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: "Unable to contact slurm controller (connect failure)",
    ESLURM_INVALID_JOB_ID: "Invalid job id specified",
}


def job_state_string(job_state: int) -> str:
    for name, bit in STATE_FLAGS:
        if job_state & bit:
            return name
    base = job_state & JOB_STATE_BASE
    return BASE_STATES[base] if base < len(BASE_STATES) else "?"


@dataclass
class SlurmJobInfo:
    """The part of libslurm's ``slurm_job_info_t`` these properties read, with C's values: ``char *`` as bytes
    (None = NULL), ``time_t`` as epoch seconds (0 = unset), uint32 with NO_VAL / INFINITE, ``job_state`` the
    state number with its flags. ``state_reason`` is held as job_state_reason_string() gives it ("None")."""

    job_id: int
    job_state: int
    name: bytes | None = None
    user_id: int = 0
    state_reason: str = "None"
    state_desc: bytes | None = None
    array_job_id: int = 0
    array_task_id: int = NO_VAL
    array_task_str: bytes | None = None
    array_max_tasks: int = 0
    start_time: int = 0
    end_time: int = 0
    suspend_time: int = 0
    pre_sus_time: int = 0
    time_limit: int = NO_VAL  # minutes
    num_nodes: int = 0
    nodes: bytes | None = None
    partition: bytes | None = None
    tres_per_node: bytes | None = None
    cluster: bytes | None = b"cluster"


# ---- pyslurm/utils --------------------------------------------------------------------------------------------
UNLIMITED = "UNLIMITED"


def to_unicode(value: bytes | None, default: str | None = None) -> str | None:
    if value and value[0] != 0:
        if value == b"None":
            return default
        return value.decode("utf-8")  # Cython's c_string_encoding=default: UTF-8, strict
    return default


def _raw_time(value: int, on_noval: int | None = None, on_inf: int | None = None) -> int | None:
    if value == NO_VAL or value == 0:
        return on_noval
    if value == INFINITE:
        return on_inf
    return value


def u32_parse(
    val: int,
    on_inf: object = UNLIMITED,
    on_noval: object = None,
    noval: int = NO_VAL,
    zero_is_noval: bool = True,
) -> object:
    if val == noval or (val == 0 and zero_is_noval):
        return on_noval
    if val == INFINITE:
        return on_inf
    return val


def to_gres_dict(gres: bytes | None) -> dict[str, object]:
    output: dict[str, object] = {}
    gres_str = to_unicode(gres)
    gres_delim = "gres:"
    if not gres_str or gres_str == "(null)":
        return {}
    for item in re.split(",(?=[^,]+?:)", gres_str):
        cnt = typ = "1"
        if gres_delim in item:
            item = item.replace(gres_delim, "")
        gres_splitted = re.split(":(?=[^:]+?)", item.replace("(", ":", 1).replace(")", ""))
        gres_splitted_len = len(gres_splitted)
        name = gres_splitted[0]
        if gres_splitted_len > 1:
            typ = gres_splitted[1]
        typ_or_none: str | None = typ
        if typ.isdigit():
            cnt = typ
            typ_or_none = None
        elif gres_splitted_len > 2:
            cnt = gres_splitted[2]
        else:
            continue
        name_and_typ = f"{name}:{typ_or_none}" if typ_or_none else name
        if "IDX" not in gres_splitted:
            output[name_and_typ] = int(cnt)
        else:
            idx = gres_splitted[3] if not typ_or_none else gres_splitted[4]
            output[name_and_typ] = {"count": int(cnt), "indexes": idx}
    return output


def uid_to_name(
    uid: int, err_on_invalid: bool = False, lookup: Mapping[int, str] | None = None
) -> str | None:
    if uid == NO_VAL or uid == INFINITE:
        return None
    try:
        return lookup[uid] if lookup else pwd.getpwuid(uid).pw_name
    except KeyError:
        if err_on_invalid:
            raise
    return str(uid)


# ---- the controller this stand-in talks to --------------------------------------------------------------------
@dataclass
class Controller:
    """What slurmctld holds, the RPCs sent to it, and whether it answers. ``now`` is what time(NULL) gives
    pyslurm's run_time."""

    jobs: list[SlurmJobInfo] = field(default_factory=list)
    rpcs: list[str] = field(default_factory=list)
    fail_with: int | None = None  # a Slurm errno every RPC fails with
    now: Callable[[], int] = lambda: int(time.time())

    def rpc(self, name: str) -> None:
        self.rpcs.append(name)
        if self.fail_with is not None:
            raise RPCError(self.fail_with)


controller = Controller()


# ---- pyslurm/core/error.pyx -----------------------------------------------------------------------------------
class PyslurmError(Exception):
    """The base Exception for all Pyslurm errors."""


class RPCError(PyslurmError):
    def __init__(self, errno: int = SLURM_ERROR, msg: str | None = None) -> None:
        self.msg = msg
        self.errno = errno
        if not msg:
            self.msg = STRERROR.get(errno, f"Unknown error {errno}")
        super().__init__(self.msg)


# ---- pyslurm/xcollections.pyx, pyslurm/core/job/job.pyx ------------------------------------------------------
class Jobs:
    def __init__(self) -> None:
        self.data: dict[str | None, dict[int, Job]] = {}

    @staticmethod
    def load(preload_passwd_info: bool = False, frozen: bool = False) -> Jobs:
        controller.rpc("slurm_load_jobs")
        jobs = Jobs()
        for info in controller.jobs:
            job = Job._from_ptr(info)
            jobs.data.setdefault(job.cluster, {})[job.id] = job
        return jobs

    def values(self) -> Iterator[Job]:
        for cluster in self.data.values():
            yield from cluster.values()


class Job:
    # ptr, passwd and groups are C-level (`cdef`), like from_ptr: Python code does not see them, hence the "_"
    __slots__ = ("_groups", "_passwd", "_ptr", "pids", "stats", "steps")

    def __init__(self, job_id: int) -> None:
        self._ptr = SlurmJobInfo(job_id=job_id, job_state=0)
        self._passwd: dict[int, str] = {}
        self._groups: dict[int, str] = {}
        self.steps: dict[int, object] = {}
        self.stats: object = None
        self.pids: dict[str, object] = {}

    def __getattr__(self, name: str) -> object:
        if name in JOB_ATTRIBUTES:
            raise AttributeError(
                f"pyslurm {VERSION} has Job.{name}, but the stand-in does not model it yet: "
                "add it from pyslurm/core/job/job.pyx"
            )
        raise AttributeError(f"'pyslurm.core.job.job.Job' object has no attribute '{name}'")

    def __repr__(self) -> str:
        return f"pyslurm.Job({self.id})"

    @staticmethod
    def load(job_id: int) -> Job:
        controller.rpc("slurm_load_job")
        found = [info for info in controller.jobs if info.job_id == job_id]
        if not found:
            raise RPCError(ESLURM_INVALID_JOB_ID)
        wrap = Job._from_ptr(found[0])
        if not wrap._is(0):  # not pending: its steps too; an error there is ignored
            try:
                controller.rpc("slurm_get_job_steps")
            except RPCError:
                pass
        return wrap

    @staticmethod
    def _from_ptr(info: SlurmJobInfo) -> Job:
        wrap = Job.__new__(Job)
        wrap._ptr, wrap._passwd, wrap._groups, wrap.steps, wrap.stats, wrap.pids = info, {}, {}, {}, None, {}
        return wrap

    def _is(self, base_state: int) -> bool:  # IS_JOB_PENDING / IS_JOB_RUNNING / IS_JOB_SUSPENDED
        return (self._ptr.job_state & JOB_STATE_BASE) == base_state

    @property
    def name(self) -> str | None:
        return to_unicode(self._ptr.name)

    @property
    def id(self) -> int:
        return self._ptr.job_id

    @property
    def cluster(self) -> str | None:
        return to_unicode(self._ptr.cluster)

    @property
    def user_id(self) -> object:
        return u32_parse(self._ptr.user_id, zero_is_noval=False)

    @property
    def user_name(self) -> str | None:
        return uid_to_name(self._ptr.user_id, lookup=self._passwd)

    @property
    def state(self) -> str | None:
        return to_unicode(job_state_string(self._ptr.job_state).encode())

    @property
    def state_reason(self) -> str | None:
        if self._ptr.state_desc:
            return to_unicode(self._ptr.state_desc)
        return to_unicode(self._ptr.state_reason.encode())

    @property
    def time_limit(self) -> int | None:
        return _raw_time(self._ptr.time_limit)

    @property
    def start_time(self) -> int | None:
        return _raw_time(self._ptr.start_time)

    @property
    def end_time(self) -> int | None:
        return _raw_time(self._ptr.end_time)

    @property
    def suspend_time(self) -> int | None:
        return _raw_time(self._ptr.suspend_time)

    @property
    def pre_suspension_time(self) -> int | None:
        return _raw_time(self._ptr.pre_sus_time)

    @property
    def partition(self) -> str | None:
        return to_unicode(self._ptr.partition)

    @property
    def num_nodes(self) -> object:
        return u32_parse(self._ptr.num_nodes)

    @property
    def allocated_nodes(self) -> str | None:
        return to_unicode(self._ptr.nodes)

    @property
    def array_id(self) -> object:
        return u32_parse(self._ptr.array_job_id)

    @property
    def array_tasks_parallel(self) -> object:
        return u32_parse(self._ptr.array_max_tasks)

    @property
    def array_task_id(self) -> object:
        return u32_parse(self._ptr.array_task_id)

    @property
    def array_tasks_waiting(self) -> str | None:
        task_str = to_unicode(self._ptr.array_task_str)
        if not task_str:
            return None
        if "%" in task_str:
            task_str = task_str[: task_str.rindex("%")]
        return task_str

    def _calc_run_time(self) -> int | None:
        if self._is(0) or not self._ptr.start_time:
            return 0
        if self._is(2):
            return self.pre_suspension_time
        if self._is(1) or self._ptr.end_time == 0:
            etime = controller.now()
        else:
            etime = self._ptr.end_time
        if self._ptr.suspend_time:
            rtime = etime - self._ptr.suspend_time + self._ptr.pre_sus_time
        else:
            rtime = etime - self._ptr.start_time
        return rtime  # u64_parse(rtime, on_noval=0): 0 stays 0

    @property
    def run_time(self) -> int | None:
        return self._calc_run_time()

    @property
    def run_time_remaining(self) -> int | None:
        limit = self.time_limit
        if limit is None:
            return None
        return (limit * 60) - (self.run_time or 0)

    @property
    def gres_per_node(self) -> dict[str, object]:
        return to_gres_dict(self._ptr.tres_per_node)


def module() -> types.ModuleType:
    """A ``pyslurm`` module with only the names pyslurm 25.11.2 exports that this stand-in provides."""
    mod = types.ModuleType("pyslurm")
    mod.__version__ = VERSION  # type: ignore[attr-defined]
    for name in ("Job", "Jobs", "RPCError", "PyslurmError"):
        setattr(mod, name, globals()[name])
    return mod


def info_from_scontrol_json(record: Mapping[str, object]) -> SlurmJobInfo:
    """A job record as ``scontrol --json show job`` printed it (Slurm's data_parser writes the same
    slurm_job_info_t: a number as {set, infinite, number}, unset = NO_VAL; a NULL string as "")."""

    def num(key: str, unset: int = NO_VAL) -> int:
        value = record[key]
        if isinstance(value, int):
            return value
        assert isinstance(value, dict)
        if value.get("infinite"):
            return INFINITE
        return int(value["number"]) if value.get("set") else unset

    def text(key: str) -> bytes | None:
        value = record.get(key) or ""
        assert isinstance(value, str)
        return value.encode() if value else None

    names = record["job_state"]
    assert isinstance(names, list)
    state = 0
    for state_name in names:
        if state_name in BASE_STATES:
            state |= BASE_STATES.index(state_name)
        else:
            state |= dict(STATE_FLAGS)[state_name]
    reason = record.get("state_reason") or "None"
    assert isinstance(reason, str)
    return SlurmJobInfo(
        job_id=num("job_id"),
        job_state=state,
        name=text("name"),
        user_id=num("user_id"),
        state_reason=reason,
        state_desc=text("state_description"),
        array_job_id=num("array_job_id", 0),
        array_task_id=num("array_task_id"),
        array_task_str=text("array_task_string"),
        array_max_tasks=num("array_max_tasks", 0),
        start_time=num("start_time", 0),
        end_time=num("end_time", 0),
        suspend_time=num("suspend_time", 0),
        pre_sus_time=num("pre_sus_time", 0),
        time_limit=num("time_limit"),
        num_nodes=num("node_count", 0),
        nodes=text("nodes"),
        partition=text("partition"),
        tres_per_node=text("tres_per_node"),
        cluster=text("cluster"),
    )
