"""A GPU request read from salloc/srun-style tokens, and rendered back to argv.

The caller splits the line (IPython's ``arg_split`` or :func:`shlex.split`); this module never splits a
command line itself. It only splits option *values* whose grammar has separators (``--gres=a,b``).

    req = parse_request(["-N", "2", "--gpus-per-node=h100:4", "--gpu-bind=closest"])
    req.to_argv()  # ['--nodes=2', '--gpus-per-node=h100:4', '--gpu-bind=closest']

Every malformed value is reported (all of them, in one :class:`RequestProblems`) instead of being dropped.
Options slurmlab does not model are kept in order in ``extra`` and rendered back unchanged; unknown ones add a
line to ``warnings``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.timefmt import duration_in_words, format_duration
from slurmlab.errors import RequestError

__all__ = [
    "GPU_BIND_KINDS",
    "GRES_FLAGS",
    "Checked",
    "GpuBind",
    "GpuCount",
    "GpuRequest",
    "GresSpec",
    "Memory",
    "NodeCount",
    "Problem",
    "RETIRED_OPTIONS",
    "RequestProblems",
    "RetiredOption",
    "TimeLimit",
    "VersionBound",
    "parse_request",
    "pass_through_options",
    "raise_problems",
    "retired_option_problem",
    "retired_option_warning",
    "version_text",
]


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a request: what (naming the offending value) and the fix."""

    message: str
    hint: str


class RequestProblems(RequestError):
    """One or more problems with a request; ``problems`` lists each with its own fix."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            only = self.problems[0]
            super().__init__(only.message, hint=only.hint)
            return
        lines = [f"{len(self.problems)} problems with the request:"]
        for n, p in enumerate(self.problems, 1):
            lines.append(f"  {n}. {p.message}\n     fix: {p.hint}")
        super().__init__("\n".join(lines), hint="fix each problem listed above, then submit again")


def raise_problems(problems: Sequence[Problem]) -> None:
    """Raise all problems at once, or nothing when the list is empty."""
    if problems:
        raise RequestProblems(problems)


class _Bad(Exception):
    """Internal: a value that does not parse; turned into a Problem naming the option."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


# --------------------------------------------------------------------------- value types

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_INT_RE = re.compile(r"^\d+$")


@dataclass(frozen=True)
class GpuCount:
    """``[type:]N`` as in ``--gpus=h100:2`` (``type`` None means any GPU type)."""

    count: int
    type: str | None = None

    def render(self) -> str:
        return f"{self.type}:{self.count}" if self.type else str(self.count)


# One ``--gres`` item ``name[:type][:count]`` is the GRES item Slurm prints back (count None = 1).
GresSpec = GresItem


GPU_BIND_KINDS = ("closest", "map_gpu", "mask_gpu", "single", "per_task", "none")
_BIND_NEEDS_VALUE = {"map_gpu", "mask_gpu", "single", "per_task"}


@dataclass(frozen=True)
class GpuBind:
    """``--gpu-bind=[verbose,]kind[:value]``."""

    kind: str
    value: str | None = None
    verbose: bool = False

    def render(self) -> str:
        body = f"{self.kind}:{self.value}" if self.value is not None else self.kind
        return f"verbose,{body}" if self.verbose else body


GRES_FLAGS = (
    "enforce-binding",
    "disable-binding",
    "one-task-per-sharing",
    "multiple-tasks-per-sharing",
    "allow-task-sharing",
)


@dataclass(frozen=True)
class NodeCount:
    """``-N min[-max]``."""

    min: int
    max: int | None = None

    def render(self) -> str:
        return f"{self.min}-{self.max}" if self.max is not None else str(self.min)


_UNIT_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


@dataclass(frozen=True)
class Memory:
    """A Slurm memory size, held in KiB (Slurm's default unit is MiB; ``0`` means all of a node's)."""

    kib: int

    @property
    def mib(self) -> float:
        return self.kib / 1024

    def render(self) -> str:
        if self.kib == 0:
            return "0"
        for unit in ("T", "G", "M", "K"):
            if self.kib % _UNIT_KIB[unit] == 0:
                return f"{self.kib // _UNIT_KIB[unit]}{unit}"
        raise AssertionError("unreachable: K divides every size")

    def human(self) -> str:
        if self.kib == 0:
            return "all of each node's memory"
        for unit in ("T", "G", "M"):
            size = _UNIT_KIB[unit]
            if self.kib >= size:
                value = self.kib / size
                shown = f"{value:.0f}" if value == int(value) else f"{value:.1f}"
                return f"{shown} {unit}iB"
        return f"{self.kib} KiB"


@dataclass(frozen=True)
class TimeLimit:
    """A wall-time limit in seconds; ``seconds`` None means INFINITE/UNLIMITED."""

    seconds: int | None

    @property
    def infinite(self) -> bool:
        return self.seconds is None

    def render(self) -> str:
        return format_duration(self.seconds, unlimited="INFINITE")

    def human(self) -> str:
        if self.seconds is None:
            return "no time limit"
        return duration_in_words(self.seconds) or "no time limit (0)"


# --------------------------------------------------------------------------- value parsers


def _positive(text: str, what: str, example: str, *, zero: bool = False) -> int:
    if not _INT_RE.match(text):
        raise _Bad(f"{what} {text!r} is not a whole number", f"give a whole number, e.g. {example}")
    value = int(text)
    if value == 0 and not zero:
        raise _Bad(f"{what} {text!r} must be at least 1", f"give a whole number of 1 or more, e.g. {example}")
    return value


def _type_name(text: str, what: str, example: str) -> str:
    if not text:
        raise _Bad(f"{what} has an empty type", f"drop the empty ':' or name the type, e.g. {example}")
    if not _NAME_RE.match(text):
        raise _Bad(f"{what} type {text!r} has characters Slurm does not allow", f"write it like {example}")
    return text


def _gpu_count(opt: str) -> Callable[[str], GpuCount]:
    def parse(text: str) -> GpuCount:
        example = f"{opt}=2 or {opt}=h100:2"
        parts = text.split(":")
        if len(parts) > 2:
            raise _Bad(f"{opt}={text}: too many ':' for [type:]count", f"write {example}")
        if len(parts) == 2:
            gtype = _type_name(parts[0], f"{opt}={text}", example)
            return GpuCount(_positive(parts[1], f"{opt} count", example, zero=True), gtype)
        if text and not _INT_RE.match(text):
            typed = f" (a type needs a count too: {opt}={text}:1)" if re.search(r"[\d.]", text) else ""
            raise _Bad(
                f"{opt}={text}: {text!r} is not a GPU count",
                f"give a number, optionally after a type and ':': {example}{typed}",
            )
        return GpuCount(_positive(text, f"{opt} count", example, zero=True))

    return parse


def _gres_list(text: str) -> tuple[GresSpec, ...]:
    example = "--gres=gpu:2, --gres=gpu:h100:2 or --gres=shard:4"
    specs: list[GresSpec] = []
    for item in text.split(","):
        where = f"--gres item {item!r}" if "," in text else f"--gres={text}"
        if not item:
            raise _Bad(f"--gres={text} has an empty item", "remove the extra ',' between items")
        parts = item.split(":")
        if any(p == "" for p in parts):
            raise _Bad(f"{where} has an empty field", f"write name[:type][:count], e.g. {example}")
        if not _NAME_RE.match(parts[0]) or _INT_RE.match(parts[0]):
            raise _Bad(f"{where}: {parts[0]!r} is not a GRES name", f"start with the resource name, e.g. {example}")
        if len(parts) == 1:
            specs.append(GresSpec(parts[0]))
        elif len(parts) == 2:
            if _INT_RE.match(parts[1]):
                specs.append(GresSpec(parts[0], None, int(parts[1])))
            else:
                specs.append(GresSpec(parts[0], _type_name(parts[1], where, example)))
        elif len(parts) == 3:
            gtype = _type_name(parts[1], where, example)
            specs.append(GresSpec(parts[0], gtype, _positive(parts[2], f"{where} count", example, zero=True)))
        else:
            raise _Bad(f"{where} has too many ':' fields", f"write name[:type][:count], e.g. {example}")
    return tuple(specs)


_MAP_ITEM = re.compile(r"^\d+(\*\d+)?$")
_MASK_ITEM = re.compile(r"^(0x[0-9A-Fa-f]+|\d+)(\*\d+)?$")


def _gpu_bind(text: str) -> GpuBind:
    choices = "closest, map_gpu:<list>, mask_gpu:<list>, single:<tasks_per_gpu>, per_task:<gpus_per_task>, none"
    verbose = False
    body = text
    if body == "verbose" or body.startswith("verbose,"):
        verbose = True
        body = body[len("verbose,") :] if body != "verbose" else ""
    if not body:
        raise _Bad(f"--gpu-bind={text} names no binding", f"add one of: {choices} (e.g. --gpu-bind=verbose,closest)")
    kind, colon, value = body.partition(":")
    if kind not in GPU_BIND_KINDS:
        hint = f"use one of: {choices}"
        if kind in ("map", "mask"):
            hint = f"Slurm spells it {kind}_gpu:<list>; " + hint
        raise _Bad(f"--gpu-bind={text}: {kind!r} is not a GPU binding", hint)
    if kind not in _BIND_NEEDS_VALUE:
        if colon:
            raise _Bad(f"--gpu-bind={text}: {kind} takes no value", f"write --gpu-bind={kind}")
        return GpuBind(kind, None, verbose)
    if not value:
        raise _Bad(f"--gpu-bind={text}: {kind} needs a value", f"write e.g. --gpu-bind={kind}:1")
    if kind in ("single", "per_task"):
        _positive(value, f"--gpu-bind {kind}", f"--gpu-bind={kind}:1")
    else:
        pattern = _MAP_ITEM if kind == "map_gpu" else _MASK_ITEM
        bad = [v for v in value.split(",") if not pattern.match(v)]
        if bad:
            sample = "0,1" if kind == "map_gpu" else "0x1,0x2"
            raise _Bad(
                f"--gpu-bind={text}: {bad[0]!r} is not a GPU {'index' if kind == 'map_gpu' else 'mask'}",
                f"give a comma-separated list, e.g. --gpu-bind={kind}:{sample}",
            )
    return GpuBind(kind, value, verbose)


def _gres_flags(text: str) -> tuple[str, ...]:
    flags = tuple(text.split(","))
    for flag in flags:
        if flag not in GRES_FLAGS:
            raise _Bad(f"--gres-flags={text}: {flag!r} is not a GRES flag", f"use one of: {', '.join(GRES_FLAGS)}")
    return flags


_CPU_BIND_WORDS = {
    "none", "no", "rank", "rank_ldom", "sockets", "cores", "threads", "ldoms", "boards",
}
_CPU_BIND_LISTS = {"map_cpu", "mask_cpu", "map_ldom", "mask_ldom"}


def _cpu_bind(text: str) -> str:
    # --cpu-bind=[{quiet|verbose},]<type>; map/mask types carry a comma list, so only the head is split off
    body = text
    while body.split(",")[0] in ("quiet", "verbose"):
        body = body.partition(",")[2]
    key, colon, rest = body.partition(":")
    ok = (key in _CPU_BIND_LISTS and bool(rest)) or (key in _CPU_BIND_WORDS and not colon)
    if not ok:
        raise _Bad(
            f"--cpu-bind={text}: {body!r} is not a CPU binding",
            "use e.g. --cpu-bind=cores, sockets, rank, none, map_cpu:<list> or mask_cpu:<list>",
        )
    return text


_MEM_RE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)


def _memory(opt: str) -> Callable[[str], Memory]:
    def parse(text: str) -> Memory:
        match = _MEM_RE.match(text)
        if not match:
            raise _Bad(f"{opt}={text} is not a memory size", f"write a number with K, M, G or T, e.g. {opt}=8G")
        unit = (match.group(2) or "M").upper()
        return Memory(int(match.group(1)) * _UNIT_KIB[unit])

    return parse


def _time(text: str) -> TimeLimit:
    forms = "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds"
    if text.upper() in ("INFINITE", "UNLIMITED"):
        return TimeLimit(None)
    days = 0
    clock = text
    if "-" in text:
        day_text, _, clock = text.partition("-")
        if not _INT_RE.match(day_text) or not clock:
            raise _Bad(f"--time={text} is not a Slurm time", f"use one of: {forms}")
        days = int(day_text)
    fields = clock.split(":")
    if len(fields) > 3 or not all(_INT_RE.match(f) for f in fields):
        raise _Bad(f"--time={text} is not a Slurm time", f"use one of: {forms} (e.g. --time=1:30:00)")
    nums = [int(f) for f in fields]
    if "-" in text:
        # days-hours[:minutes[:seconds]]
        hours, minutes, seconds = (nums + [0, 0])[:3]
        limits = [("hours", hours, 24), ("minutes", minutes, 60), ("seconds", seconds, 60)]
    elif len(nums) == 3:
        hours, minutes, seconds = nums
        limits = [("minutes", minutes, 60), ("seconds", seconds, 60)]
    elif len(nums) == 2:
        hours, (minutes, seconds) = 0, nums
        limits = [("seconds", seconds, 60)]
    else:
        hours, minutes, seconds = 0, nums[0], 0
        limits = []
    for name, value, limit in limits:
        if value >= limit:
            raise _Bad(
                f"--time={text}: {value} {name} is out of range (0-{limit - 1})",
                f"carry into the next field (e.g. 5:99:00 is 6:39:00); forms: {forms}",
            )
    return TimeLimit(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _nodes(text: str) -> NodeCount:
    low, dash, high = text.partition("-")
    example = "--nodes=2 or --nodes=1-4"
    if "," in text:
        raise _Bad(f"--nodes={text}: slurmlab takes a count or a min-max range", f"write {example}")
    lo = _positive(low, "--nodes", example)
    if not dash:
        return NodeCount(lo)
    hi = _positive(high, "--nodes maximum", example)
    if hi < lo:
        raise _Bad(f"--nodes={text}: the maximum {hi} is below the minimum {lo}", f"write --nodes={hi}-{lo}")
    return NodeCount(lo, hi)


def _int_opt(opt: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        return _positive(text, opt, f"{opt}=2")

    return parse


def _text_opt(opt: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not text:
            raise _Bad(f"{opt} is empty", f"give a value after {opt}= or drop the option")
        return text

    return parse


_EXCLUSIVE = ("", "user", "mcs", "topo")


def _exclusive(text: str) -> str:
    if text not in _EXCLUSIVE:
        raise _Bad(f"--exclusive={text} is not an exclusivity mode", "write --exclusive, or --exclusive=user|mcs|topo")
    return text


# --------------------------------------------------------------------------- the option table


@dataclass(frozen=True)
class _Opt:
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
_OPTIONS: tuple[_Opt, ...] = (
    _Opt("partition", "partition", "p", _text_opt("--partition"), _r_str),
    _Opt("account", "account", "A", _text_opt("--account"), _r_str),
    _Opt("qos", "qos", "q", _text_opt("--qos"), _r_str),
    _Opt("reservation", "reservation", None, _text_opt("--reservation"), _r_str),
    _Opt("job_name", "job-name", "J", _text_opt("--job-name"), _r_str),
    _Opt("time", "time", "t", _time, _r_obj),
    _Opt("nodes", "nodes", "N", _nodes, _r_obj),
    _Opt("ntasks", "ntasks", "n", _int_opt("--ntasks"), _r_str),
    _Opt("ntasks_per_node", "ntasks-per-node", None, _int_opt("--ntasks-per-node"), _r_str),
    _Opt("cpus_per_task", "cpus-per-task", "c", _int_opt("--cpus-per-task"), _r_str),
    _Opt("gpus", "gpus", "G", _gpu_count("--gpus"), _r_obj),
    _Opt("gpus_per_node", "gpus-per-node", None, _gpu_count("--gpus-per-node"), _r_obj),
    _Opt("gpus_per_task", "gpus-per-task", None, _gpu_count("--gpus-per-task"), _r_obj),
    _Opt("gpus_per_socket", "gpus-per-socket", None, _gpu_count("--gpus-per-socket"), _r_obj),
    _Opt("gres", "gres", None, _gres_list, _r_gres),
    _Opt("gres_flags", "gres-flags", None, _gres_flags, _r_flags),
    _Opt("gpu_bind", "gpu-bind", None, _gpu_bind, _r_obj),
    _Opt("cpu_bind", "cpu-bind", None, _cpu_bind, _r_str),
    _Opt("cpus_per_gpu", "cpus-per-gpu", None, _int_opt("--cpus-per-gpu"), _r_str),
    _Opt("mem", "mem", None, _memory("--mem"), _r_obj),
    _Opt("mem_per_gpu", "mem-per-gpu", None, _memory("--mem-per-gpu"), _r_obj),
    _Opt("mem_per_cpu", "mem-per-cpu", None, _memory("--mem-per-cpu"), _r_obj),
    _Opt("gpu_freq", "gpu-freq", None, _text_opt("--gpu-freq"), _r_str),
    _Opt("mpi", "mpi", None, _text_opt("--mpi"), _r_str),
    _Opt("exclusive", "exclusive", None, _exclusive, _r_str, optional_value=True),
    _Opt("nodelist", "nodelist", "w", _text_opt("--nodelist"), _r_str),
    _Opt("exclude", "exclude", "x", _text_opt("--exclude"), _r_str),
    _Opt("constraint", "constraint", "C", _text_opt("--constraint"), _r_str),
    _Opt("comment", "comment", None, _text_opt("--comment"), _r_str),
)
_BY_LONG = {o.long: o for o in _OPTIONS}
_BY_LONG.update({"tasks-per-node": _BY_LONG["ntasks-per-node"]})
_BY_SHORT = {o.short: o for o in _OPTIONS if o.short}

# Real salloc/srun options slurmlab does not model: kept in `extra` with no warning.
_PASS_NO_VALUE = {
    "--no-shell", "--overlap", "--exact", "--hold", "-H", "--quiet", "-Q", "--verbose", "-v", "--unbuffered",
    "-u", "--label", "-l", "--pty", "--contiguous", "--oversubscribe", "-s", "--spread-job", "--use-min-nodes",
    "--test-only", "--parsable", "--no-kill", "-k", "--immediate", "-I", "--requeue", "--no-requeue",
    "--overcommit", "-O",
}
_PASS_VALUE = {
    "--output", "-o", "--error", "-e", "--input", "-i", "--chdir", "-D", "--export", "--begin", "-b",
    "--signal", "--dependency", "-d", "--array", "-a", "--wrap", "--jobid", "--mem-bind", "--distribution",
    "-m", "--mail-type", "--mail-user", "--ntasks-per-gpu", "--tres-per-task", "--tres-bind", "--licenses",
    "-L", "--nice", "--priority", "--cluster", "-M", "--clusters", "--wckey", "--network", "--switches",
    "--cores-per-socket", "--sockets-per-node", "--threads-per-core", "--ntasks-per-socket",
    "--ntasks-per-core", "--hint", "--mincpus", "--tmp", "--container",
}


# --------------------------------------------------------------------------- what differs between versions

def version_text(version: Sequence[int]) -> str:
    """``(24, 11, 5)`` as Slurm writes it: ``24.11.5``; the month keeps its two digits (``22.05``)."""
    parts = [str(version[0])] + [f"{p:02d}" if n == 0 else str(p) for n, p in enumerate(version[1:])]
    return ".".join(parts)


@dataclass(frozen=True)
class VersionBound:
    """What is known of a behaviour across Slurm versions: seen accepted up to ``accepted_to`` and refused from
    ``refused_from`` on. Versions in between were not tried, so they answer None (unknown), as does no version."""

    accepted_to: tuple[int, int]
    refused_from: tuple[int, int]

    def refuses(self, version: Sequence[int] | None) -> bool | None:
        if not version:
            return None
        v = tuple(version[:2])
        if v >= self.refused_from:
            return True
        if v <= self.accepted_to:
            return False
        return None

    def since(self) -> str:
        return f"Slurm {version_text(self.refused_from)} and later"


@dataclass(frozen=True)
class RetiredOption:
    """A salloc/srun option real Slurm had and dropped: passed through only where the Slurm in use has it."""

    flag: str
    bound: VersionBound
    fix: str


# Seen on real Slurm: 22.05's salloc and srun take --uid/--gid (root only); 24.11's and 26.05's answer
# "unrecognized option" (sbatch keeps them, but slurmlab's requests are salloc/srun lines).
RETIRED_OPTIONS: dict[str, RetiredOption] = {
    "--uid": RetiredOption("--uid", VersionBound((22, 5), (24, 11)),
                           "Slurm runs a job as whoever submits it: submit as that user instead "
                           "(e.g. `sudo -u USER salloc …`), or drop --uid"),
    "--gid": RetiredOption("--gid", VersionBound((22, 5), (24, 11)),
                           "drop --gid: the job runs with the submitting user's groups (to charge a project, "
                           "use --account)"),
}


def pass_through_options(version: Sequence[int] | None = None) -> frozenset[str]:
    """Real salloc/srun options slurmlab passes to ``version``'s Slurm unchanged and without a warning."""
    kept = {flag for flag, r in RETIRED_OPTIONS.items() if r.bound.refuses(version) is False}
    return frozenset(_PASS_NO_VALUE | _PASS_VALUE | kept)


def retired_option_problem(group: Sequence[str], version: Sequence[int] | None) -> Problem | None:
    """The Problem of a retired option (its tokens ``group``) that ``version``'s Slurm refuses, else None."""
    retired = RETIRED_OPTIONS.get(group[0].partition("=")[0]) if group else None
    if retired is None or not retired.bound.refuses(version):
        return None
    assert version  # refuses() is True only for a known version
    return Problem(
        f"{' '.join(group)}: salloc and srun of Slurm {version_text(version)} have no {retired.flag} option "
        f"(they answer \"unrecognized option\")",
        retired.fix,
    )


def retired_option_warning(group: Sequence[str], version: Sequence[int] | None) -> str | None:
    """A warning for a retired option where it is not known whether ``version``'s Slurm still takes it."""
    retired = RETIRED_OPTIONS.get(group[0].partition("=")[0]) if group else None
    if retired is None or retired.bound.refuses(version) is not None:
        return None
    which = f"Slurm {version_text(version)}" if version else "this cluster's Slurm (version unknown)"
    return (f"{' '.join(group)} passed to Slurm unchanged: {retired.bound.since()} refuse {retired.flag} "
            f"(\"unrecognized option\") and slurmlab cannot tell whether {which} still takes it")


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Checked:
    """What :func:`slurmlab.core.request.pipeline.check_request` checked a request against.

    ``argv`` is the request as it was checked: a copy changed since (``dataclasses.replace``) renders another
    argv and so counts as unchecked. ``partitions`` is the cluster's partition count, None when the request was
    checked on its own (``why_not`` then says why the cluster was not asked)."""

    argv: tuple[str, ...]
    partitions: int | None = None
    version: tuple[int, ...] | None = None
    why_not: str = ""

    @property
    def against_cluster(self) -> bool:
        return self.partitions is not None

    def note(self) -> str:
        """In words, for a dry run: ``checked against the cluster (3 partitions), Slurm 24.11.5``."""
        if self.partitions is None:
            return f"not checked against the cluster: {self.why_not or 'no cluster inventory was given'}"
        note = f"checked against the cluster ({self.partitions} partitions)"
        return note + (f", Slurm {version_text(self.version)}" if self.version else "")


@dataclass(frozen=True)
class GpuRequest:
    """What a user asks Slurm for; every field None/empty means "not given" (Slurm's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    job_name: str | None = None
    time: TimeLimit | None = None
    nodes: NodeCount | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    gpus: GpuCount | None = None
    gpus_per_node: GpuCount | None = None
    gpus_per_task: GpuCount | None = None
    gpus_per_socket: GpuCount | None = None
    gres: tuple[GresSpec, ...] = ()
    gres_flags: tuple[str, ...] = ()
    gpu_bind: GpuBind | None = None
    cpu_bind: str | None = None
    cpus_per_gpu: int | None = None
    mem: Memory | None = None
    mem_per_gpu: Memory | None = None
    mem_per_cpu: Memory | None = None
    gpu_freq: str | None = None
    mpi: str | None = None
    exclusive: str | None = None  # "" for plain --exclusive
    nodelist: str | None = None
    exclude: str | None = None
    constraint: str | None = None
    comment: str | None = None
    extra: tuple[tuple[str, ...], ...] = ()  # options slurmlab does not model, in order, each as its tokens
    command: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)
    # set only by the one pipeline (core.request.pipeline.check_request); None: never checked
    checked: Checked | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, tokens: Sequence[str]) -> GpuRequest:
        return parse_request(tokens)

    def to_argv(self) -> list[str]:
        """Canonical long-form argv: known options first, then ``extra`` in order, then ``-- command``."""
        argv: list[str] = []
        for opt in _OPTIONS:
            value = getattr(self, opt.field)
            if value is None or (isinstance(value, tuple) and not value):
                continue
            if opt.optional_value and value == "":
                argv.append(f"--{opt.long}")
            else:
                argv.append(f"--{opt.long}={opt.render(value)}")
        for group in self.extra:
            argv.extend(group)
        if self.command:
            argv.append("--")
            argv.extend(self.command)
        return argv

    # ---- derived views used by validation and explanations

    @property
    def gpu_gres(self) -> tuple[GresSpec, ...]:
        return tuple(s for s in self.gres if s.is_gpu)

    @property
    def shared_gres(self) -> tuple[GresSpec, ...]:
        return tuple(s for s in self.gres if s.is_shared)

    @property
    def gpu_options(self) -> tuple[tuple[str, GpuCount], ...]:
        """Every ``--gpus*`` option given, as (option, count)."""
        pairs = (
            ("--gpus", self.gpus),
            ("--gpus-per-node", self.gpus_per_node),
            ("--gpus-per-task", self.gpus_per_task),
            ("--gpus-per-socket", self.gpus_per_socket),
        )
        return tuple((name, c) for name, c in pairs if c is not None)

    @property
    def wants_gpus(self) -> bool:
        """Whole GPUs (or MIG slices) requested with a count above zero."""
        return any(c.count for _, c in self.gpu_options) or any(s.amount for s in self.gpu_gres)

    @property
    def wants_shared_gpu(self) -> bool:
        return any(s.amount for s in self.shared_gres)


def _is_option(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and tok != "--" and not _INT_RE.match(tok[1:])


def parse_request(tokens: Sequence[str], *, version: Sequence[int] | None = None) -> GpuRequest:
    """Read salloc/srun options from already-split tokens.

    Raises :class:`RequestProblems` (a RequestError) listing every malformed value. Repeated options: the last
    wins, as in Slurm, with a warning. Tokens after ``--`` or after the first non-option are the ``command``.
    With the Slurm ``version`` known, an option that Slurm no longer has (``--uid``) is one of the problems;
    without it, such an option is kept in ``extra`` for :func:`slurmlab.core.request.validate.validate` to judge.
    """
    if isinstance(tokens, str):
        raise RequestError(
            "parse_request takes a list of tokens, not a string",
            hint="split the line first, e.g. IPython's arg_split(line) or shlex.split(line)",
        )
    values: dict[str, object] = {}
    seen: dict[str, str] = {}
    extra: list[tuple[str, ...]] = []
    command: tuple[str, ...] = ()
    problems: list[Problem] = []
    warnings: list[str] = []
    toks = list(tokens)
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok == "--":
            command = tuple(toks[i + 1 :])
            break
        if not _is_option(tok):
            command = tuple(toks[i:])
            break
        opt: _Opt | None
        value: str | None
        if tok.startswith("--"):
            name, eq, attached = tok[2:].partition("=")
            opt = _BY_LONG.get(name)
            flag = f"--{name}"
            value = attached if eq else None
        else:
            opt = _BY_SHORT.get(tok[1])
            flag = tok[:2]
            value = tok[2:] or None
        if opt is None:
            group, i = _pass_through(toks, i, flag, value, warnings)
            retired = retired_option_problem(group, version)
            if retired is not None:
                problems.append(retired)
            else:
                extra.append(group)
            continue
        if value is None and not opt.optional_value:
            if i + 1 >= len(toks):
                how = f"{flag}=VALUE or {flag} VALUE" if flag.startswith("--") else f"{flag} VALUE or {flag}VALUE"
                problems.append(Problem(f"{flag} needs a value", f"write {how}"))
                break
            value = toks[i + 1]
            i += 1
        i += 1
        try:
            parsed = opt.parse("" if value is None else value)
        except _Bad as bad:
            problems.append(Problem(bad.message, bad.hint))
            continue
        if opt.field in seen:
            warnings.append(f"--{opt.long} given more than once; the last one ({value!r}) wins, as in Slurm")
        seen[opt.field] = flag
        values[opt.field] = parsed
    raise_problems(problems)
    # each value is what the parser _OPTIONS pairs with its field returned: mypy cannot follow that pairing
    return GpuRequest(**values, extra=tuple(extra), command=command, warnings=tuple(warnings))  # type: ignore[arg-type]


def _pass_through(
    toks: list[str], i: int, flag: str, value: str | None, warnings: list[str]
) -> tuple[tuple[str, ...], int]:
    tok = toks[i]
    if value is not None or flag in _PASS_NO_VALUE:
        if flag not in _PASS_NO_VALUE and flag not in _PASS_VALUE and flag not in RETIRED_OPTIONS:
            warnings.append(f"unknown option {tok!r} passed to Slurm unchanged; slurmlab did not check it")
        return (tok,), i + 1
    takes_next = i + 1 < len(toks) and not _is_option(toks[i + 1]) and toks[i + 1] != "--"
    if flag in _PASS_VALUE or flag in RETIRED_OPTIONS:
        return (tuple(toks[i : i + 2]) if takes_next else (tok,)), i + (2 if takes_next else 1)
    if takes_next:
        warnings.append(
            f"unknown option {tok!r} passed to Slurm unchanged with {toks[i + 1]!r} taken as its value; "
            "slurmlab did not check it (write --opt=value to make this explicit)"
        )
        return (tok, toks[i + 1]), i + 2
    warnings.append(f"unknown option {tok!r} passed to Slurm unchanged; slurmlab did not check it")
    return (tok,), i + 1
