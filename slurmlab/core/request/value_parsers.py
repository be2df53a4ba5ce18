"""Readers of one option value each (``--gres=gpu:h100:2,shard:4``, ``--time=1-12``, ``--gpu-bind=map_gpu:0,1`` …).

Each takes the value as the user wrote it and returns its model from :mod:`slurmlab.core.request.values`, or raises
:class:`~slurmlab.core.request.problems.BadValue` naming the value and the fix. Only values whose grammar has
separators are split here; a command line never is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from slurmlab.core.request.problems import BadValue
from slurmlab.core.request.values import (
    GPU_BIND_KINDS,
    GRES_FLAGS,
    UNIT_KIB,
    GpuBind,
    GpuCount,
    GresSpec,
    Memory,
    NodeCount,
    TimeLimit,
)

__all__ = [
    "INT_RE",
    "read_cpu_bind",
    "read_exclusive",
    "read_gpu_bind",
    "read_gpu_count",
    "read_gres_flags",
    "read_gres_list",
    "read_int",
    "read_memory",
    "read_nodes",
    "read_text",
    "read_time",
]

_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
INT_RE = re.compile(r"^\d+$")
_BIND_NEEDS_VALUE = {"map_gpu", "mask_gpu", "single", "per_task"}


def _positive(text: str, what: str, example: str, *, zero: bool = False) -> int:
    if not INT_RE.match(text):
        raise BadValue(f"{what} {text!r} is not a whole number", f"give a whole number, e.g. {example}")
    value = int(text)
    if value == 0 and not zero:
        raise BadValue(
            f"{what} {text!r} must be at least 1", f"give a whole number of 1 or more, e.g. {example}"
        )
    return value


def _type_name(text: str, what: str, example: str) -> str:
    if not text:
        raise BadValue(f"{what} has an empty type", f"drop the empty ':' or name the type, e.g. {example}")
    if not _NAME_RE.match(text):
        raise BadValue(
            f"{what} type {text!r} has characters Slurm does not allow", f"write it like {example}"
        )
    return text


def _number_as_type(given: str, form: str, gtype: str, fix: str) -> None:
    """Refuse a GPU type that is a number (``--gpus=4:1``, ``--gres=gpu:4:1``): Slurm reads ``form``, so the 4
    would be a GPU type no cluster has, and the partition check would then say "no 4 GPUs"."""
    if INT_RE.match(gtype):
        raise BadValue(
            f"{given}: Slurm reads {form}, so {gtype!r} would be a GPU type, not a number of GPUs", fix
        )


def _gpus_in_words(count: str) -> str:
    return f"for {count} GPUs on each node write --gpus-per-node={count}; for {count} in all, --gpus={count}"


def read_gpu_count(opt: str) -> Callable[[str], GpuCount]:
    def parse(text: str) -> GpuCount:
        example = f"{opt}=2 or {opt}=h100:2"
        parts = text.split(":")
        if len(parts) > 2:
            raise BadValue(f"{opt}={text}: too many ':' for [type:]count", f"write {example}")
        if len(parts) == 2:
            fix = _gpus_in_words(parts[0]) if opt == "--gpus" else f"write {opt}={parts[0]}"
            _number_as_type(f"{opt}={text}", "[type:]count", parts[0], fix)
            gtype = _type_name(parts[0], f"{opt}={text}", example)
            return GpuCount(_positive(parts[1], f"{opt} count", example, zero=True), gtype)
        if text and not INT_RE.match(text):
            typed = f" (a type needs a count too: {opt}={text}:1)" if re.search(r"[\d.]", text) else ""
            raise BadValue(
                f"{opt}={text}: {text!r} is not a GPU count",
                f"give a number, optionally after a type and ':': {example}{typed}",
            )
        return GpuCount(_positive(text, f"{opt} count", example, zero=True))

    return parse


def read_gres_list(text: str) -> tuple[GresSpec, ...]:
    example = "--gres=gpu:2, --gres=gpu:h100:2 or --gres=shard:4"
    specs: list[GresSpec] = []
    for item in text.split(","):
        where = f"--gres item {item!r}" if "," in text else f"--gres={text}"
        if not item:
            raise BadValue(f"--gres={text} has an empty item", "remove the extra ',' between items")
        parts = item.split(":")
        if any(p == "" for p in parts):
            raise BadValue(f"{where} has an empty field", f"write name[:type][:count], e.g. {example}")
        if not _NAME_RE.match(parts[0]) or INT_RE.match(parts[0]):
            raise BadValue(
                f"{where}: {parts[0]!r} is not a GRES name", f"start with the resource name, e.g. {example}"
            )
        if len(parts) == 1:
            specs.append(GresSpec(parts[0]))
        elif len(parts) == 2:
            if INT_RE.match(parts[1]):
                specs.append(GresSpec(parts[0], None, int(parts[1])))
            else:
                specs.append(GresSpec(parts[0], _type_name(parts[1], where, example)))
        elif len(parts) == 3:
            if parts[0] == "gpu":
                _number_as_type(where, "name[:type][:count]", parts[1], _gpus_in_words(parts[1]))
            gtype = _type_name(parts[1], where, example)
            specs.append(GresSpec(parts[0], gtype, _positive(parts[2], f"{where} count", example, zero=True)))
        else:
            raise BadValue(f"{where} has too many ':' fields", f"write name[:type][:count], e.g. {example}")
    return tuple(specs)


_MAP_ITEM = re.compile(r"^\d+(\*\d+)?$")
_MASK_ITEM = re.compile(r"^(0x[0-9A-Fa-f]+|\d+)(\*\d+)?$")


def read_gpu_bind(text: str) -> GpuBind:
    choices = (
        "closest, map_gpu:<list>, mask_gpu:<list>, single:<tasks_per_gpu>, per_task:<gpus_per_task>, none"
    )
    verbose = False
    body = text
    if body == "verbose" or body.startswith("verbose,"):
        verbose = True
        body = body[len("verbose,") :] if body != "verbose" else ""
    if not body:
        raise BadValue(
            f"--gpu-bind={text} names no binding", f"add one of: {choices} (e.g. --gpu-bind=verbose,closest)"
        )
    kind, colon, value = body.partition(":")
    if kind not in GPU_BIND_KINDS:
        hint = f"use one of: {choices}"
        if kind in ("map", "mask"):
            hint = f"Slurm spells it {kind}_gpu:<list>; " + hint
        raise BadValue(f"--gpu-bind={text}: {kind!r} is not a GPU binding", hint)
    if kind not in _BIND_NEEDS_VALUE:
        if colon:
            raise BadValue(f"--gpu-bind={text}: {kind} takes no value", f"write --gpu-bind={kind}")
        return GpuBind(kind, None, verbose)
    if not value:
        raise BadValue(f"--gpu-bind={text}: {kind} needs a value", f"write e.g. --gpu-bind={kind}:1")
    if kind in ("single", "per_task"):
        _positive(value, f"--gpu-bind {kind}", f"--gpu-bind={kind}:1")
    else:
        pattern = _MAP_ITEM if kind == "map_gpu" else _MASK_ITEM
        bad = [v for v in value.split(",") if not pattern.match(v)]
        if bad:
            sample = "0,1" if kind == "map_gpu" else "0x1,0x2"
            raise BadValue(
                f"--gpu-bind={text}: {bad[0]!r} is not a GPU {'index' if kind == 'map_gpu' else 'mask'}",
                f"give a comma-separated list, e.g. --gpu-bind={kind}:{sample}",
            )
    return GpuBind(kind, value, verbose)


def read_gres_flags(text: str) -> tuple[str, ...]:
    flags = tuple(text.split(","))
    for flag in flags:
        if flag not in GRES_FLAGS:
            raise BadValue(
                f"--gres-flags={text}: {flag!r} is not a GRES flag", f"use one of: {', '.join(GRES_FLAGS)}"
            )
    return flags


_CPU_BIND_WORDS = {
    "none",
    "no",
    "rank",
    "rank_ldom",
    "sockets",
    "cores",
    "threads",
    "ldoms",
    "boards",
}
_CPU_BIND_LISTS = {"map_cpu", "mask_cpu", "map_ldom", "mask_ldom"}


def read_cpu_bind(text: str) -> str:
    # --cpu-bind=[{quiet|verbose},]<type>; map/mask types carry a comma list, so only the head is split off
    body = text
    while body.split(",")[0] in ("quiet", "verbose"):
        body = body.partition(",")[2]
    key, colon, rest = body.partition(":")
    ok = (key in _CPU_BIND_LISTS and bool(rest)) or (key in _CPU_BIND_WORDS and not colon)
    if not ok:
        raise BadValue(
            f"--cpu-bind={text}: {body!r} is not a CPU binding",
            "use e.g. --cpu-bind=cores, sockets, rank, none, map_cpu:<list> or mask_cpu:<list>",
        )
    return text


_MEM_RE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)


def read_memory(opt: str) -> Callable[[str], Memory]:
    def parse(text: str) -> Memory:
        match = _MEM_RE.match(text)
        if not match:
            raise BadValue(
                f"{opt}={text} is not a memory size", f"write a number with K, M, G or T, e.g. {opt}=8G"
            )
        unit = (match.group(2) or "M").upper()
        return Memory(int(match.group(1)) * UNIT_KIB[unit])

    return parse


def read_time(text: str) -> TimeLimit:
    forms = "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds"
    if text.upper() in ("INFINITE", "UNLIMITED"):
        return TimeLimit(None)
    days = 0
    clock = text
    if "-" in text:
        day_text, _, clock = text.partition("-")
        if not INT_RE.match(day_text) or not clock:
            raise BadValue(f"--time={text} is not a Slurm time", f"use one of: {forms}")
        days = int(day_text)
    fields = clock.split(":")
    if len(fields) > 3 or not all(INT_RE.match(f) for f in fields):
        raise BadValue(f"--time={text} is not a Slurm time", f"use one of: {forms} (e.g. --time=1:30:00)")
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
            raise BadValue(
                f"--time={text}: {value} {name} is out of range (0-{limit - 1})",
                f"carry into the next field (e.g. 5:99:00 is 6:39:00); forms: {forms}",
            )
    return TimeLimit(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def read_nodes(text: str) -> NodeCount:
    low, dash, high = text.partition("-")
    example = "--nodes=2 or --nodes=1-4"
    if "," in text:
        raise BadValue(f"--nodes={text}: slurmlab takes a count or a min-max range", f"write {example}")
    lo = _positive(low, "--nodes", example)
    if not dash:
        return NodeCount(lo)
    hi = _positive(high, "--nodes maximum", example)
    if hi < lo:
        raise BadValue(
            f"--nodes={text}: the maximum {hi} is below the minimum {lo}", f"write --nodes={hi}-{lo}"
        )
    return NodeCount(lo, hi)


def read_int(opt: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        return _positive(text, opt, f"{opt}=2")

    return parse


def read_text(opt: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not text:
            raise BadValue(f"{opt} is empty", f"give a value after {opt}= or drop the option")
        return text

    return parse


_EXCLUSIVE = ("", "user", "mcs", "topo")


def read_exclusive(text: str) -> str:
    if text not in _EXCLUSIVE:
        raise BadValue(
            f"--exclusive={text} is not an exclusivity mode",
            "write --exclusive, or --exclusive=user|mcs|topo",
        )
    return text
