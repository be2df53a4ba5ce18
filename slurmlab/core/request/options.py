"""The salloc/srun options slurmlab models, in one table: each option's field of GpuRequest, its long and short
flag, the reader of its value and how it renders back; and the real options slurmlab passes through unmodelled."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from slurmlab.core.request.value_parsers import (
    INT_RE,
    read_cpu_bind,
    read_exclusive,
    read_gpu_bind,
    read_gpu_count,
    read_gres_flags,
    read_gres_list,
    read_int,
    read_memory,
    read_nodes,
    read_text,
    read_time,
)

__all__ = ["BY_LONG", "BY_SHORT", "OPTIONS", "PASS_NO_VALUE", "PASS_VALUE", "Option", "is_option"]


@dataclass(frozen=True)
class Option:
    """One modelled option: ``field`` of GpuRequest, its flags, the reader of its value and its renderer."""

    field: str
    long: str
    short: str | None
    parse: Callable[[str], object]
    render: Callable[[object], str]
    optional_value: bool = False  # --exclusive[=mode]: never takes the next token


@runtime_checkable
class _Renders(Protocol):
    def render(self) -> str: ...


def _r_str(v: object) -> str:
    return str(v)


def _r_obj(v: object) -> str:
    if not isinstance(v, _Renders):
        raise TypeError(f"{type(v).__name__} has no render()")
    return str(v.render())


def _r_gres(v: object) -> str:
    if not isinstance(v, Iterable):
        raise TypeError(f"expected GRES items, not {type(v).__name__}")
    return ",".join(_r_obj(s) for s in v)


def _r_flags(v: object) -> str:
    if not isinstance(v, Iterable):
        raise TypeError(f"expected flags, not {type(v).__name__}")
    return ",".join(v)


# The order here is the order of to_argv().
OPTIONS: tuple[Option, ...] = (
    Option("partition", "partition", "p", read_text("--partition"), _r_str),
    Option("account", "account", "A", read_text("--account"), _r_str),
    Option("qos", "qos", "q", read_text("--qos"), _r_str),
    Option("reservation", "reservation", None, read_text("--reservation"), _r_str),
    Option("job_name", "job-name", "J", read_text("--job-name"), _r_str),
    Option("time", "time", "t", read_time, _r_obj),
    Option("nodes", "nodes", "N", read_nodes, _r_obj),
    Option("ntasks", "ntasks", "n", read_int("--ntasks"), _r_str),
    Option("ntasks_per_node", "ntasks-per-node", None, read_int("--ntasks-per-node"), _r_str),
    Option("cpus_per_task", "cpus-per-task", "c", read_int("--cpus-per-task"), _r_str),
    Option("gpus", "gpus", "G", read_gpu_count("--gpus"), _r_obj),
    Option("gpus_per_node", "gpus-per-node", None, read_gpu_count("--gpus-per-node"), _r_obj),
    Option("gpus_per_task", "gpus-per-task", None, read_gpu_count("--gpus-per-task"), _r_obj),
    Option("gpus_per_socket", "gpus-per-socket", None, read_gpu_count("--gpus-per-socket"), _r_obj),
    Option("gres", "gres", None, read_gres_list, _r_gres),
    Option("gres_flags", "gres-flags", None, read_gres_flags, _r_flags),
    Option("gpu_bind", "gpu-bind", None, read_gpu_bind, _r_obj),
    Option("cpu_bind", "cpu-bind", None, read_cpu_bind, _r_str),
    Option("cpus_per_gpu", "cpus-per-gpu", None, read_int("--cpus-per-gpu"), _r_str),
    Option("mem", "mem", None, read_memory("--mem"), _r_obj),
    Option("mem_per_gpu", "mem-per-gpu", None, read_memory("--mem-per-gpu"), _r_obj),
    Option("mem_per_cpu", "mem-per-cpu", None, read_memory("--mem-per-cpu"), _r_obj),
    Option("gpu_freq", "gpu-freq", None, read_text("--gpu-freq"), _r_str),
    Option("mpi", "mpi", None, read_text("--mpi"), _r_str),
    Option("exclusive", "exclusive", None, read_exclusive, _r_str, optional_value=True),
    Option("nodelist", "nodelist", "w", read_text("--nodelist"), _r_str),
    Option("exclude", "exclude", "x", read_text("--exclude"), _r_str),
    Option("constraint", "constraint", "C", read_text("--constraint"), _r_str),
    Option("comment", "comment", None, read_text("--comment"), _r_str),
)
BY_LONG = {o.long: o for o in OPTIONS}
BY_LONG.update({"tasks-per-node": BY_LONG["ntasks-per-node"]})
BY_SHORT = {o.short: o for o in OPTIONS if o.short}

# Real salloc/srun options slurmlab does not model: kept in `extra` with no warning.
PASS_NO_VALUE = {
    "--no-shell",
    "--overlap",
    "--exact",
    "--hold",
    "-H",
    "--quiet",
    "-Q",
    "--verbose",
    "-v",
    "--unbuffered",
    "-u",
    "--label",
    "-l",
    "--pty",
    "--contiguous",
    "--oversubscribe",
    "-s",
    "--spread-job",
    "--use-min-nodes",
    "--test-only",
    "--parsable",
    "--no-kill",
    "-k",
    "--immediate",
    "-I",
    "--requeue",
    "--no-requeue",
    "--overcommit",
    "-O",
}
PASS_VALUE = {
    "--output",
    "-o",
    "--error",
    "-e",
    "--input",
    "-i",
    "--chdir",
    "-D",
    "--export",
    "--begin",
    "-b",
    "--signal",
    "--dependency",
    "-d",
    "--array",
    "-a",
    "--wrap",
    "--jobid",
    "--mem-bind",
    "--distribution",
    "-m",
    "--mail-type",
    "--mail-user",
    "--ntasks-per-gpu",
    "--tres-per-task",
    "--tres-bind",
    "--licenses",
    "-L",
    "--nice",
    "--priority",
    "--cluster",
    "-M",
    "--clusters",
    "--wckey",
    "--network",
    "--switches",
    "--cores-per-socket",
    "--sockets-per-node",
    "--threads-per-core",
    "--ntasks-per-socket",
    "--ntasks-per-core",
    "--hint",
    "--mincpus",
    "--tmp",
    "--container",
}


def is_option(tok: str) -> bool:
    """Whether a token is an option (``-N``, ``--gpus=2``), not ``--``, a value or a negative number."""
    return tok.startswith("-") and len(tok) > 1 and tok != "--" and not INT_RE.match(tok[1:])
