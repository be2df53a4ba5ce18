"""Parsers of ``nvidia-smi mig`` output: ``-lgip``, ``-lgipp``, ``-lgi``, ``-lci``, the log of ``-cgi ... -C``,
and the "MIG devices" table of plain ``nvidia-smi``.

A capture that starts mid-table (no title) parses, with a :class:`SmiParseWarning`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmlab.core.gpu.mig import (
    ComputeInstance,
    GpuInstance,
    GpuMig,
    MigLayout,
    choose_table,
    parse_profile_name,
)
from slurmlab.core.gpu.smi._text import clean as _clean
from slurmlab.core.gpu.smi._text import nonblank_lines as _nonblank_lines
from slurmlab.core.gpu.smi._text import warn as _warn
from slurmlab.errors import ParseError

__all__ = [
    "MigDevice",
    "MigProfileRow",
    "parse_mig_cgi_log",
    "parse_mig_devices",
    "parse_mig_lci",
    "parse_mig_lgi",
    "parse_mig_lgip",
    "parse_mig_lgipp",
]


@dataclass(frozen=True)
class MigProfileRow:
    """One row of ``nvidia-smi mig -lgip``."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int | None = None
    jpeg: int | None = None
    ofa: int | None = None


_BORDER = re.compile(r"^\+[-=+]*\+$|^\|[=+]+\|$")


def _box_rows(
    text: str, what: str, titles: tuple[str, ...], headers: tuple[str, ...]
) -> tuple[list[str], bool]:
    """The data rows (inner text of ``| ... |`` lines) of an nvidia-smi box table, and whether a title was seen."""
    rows: list[str] = []
    titled = False
    for raw in _clean(text):
        s = raw.strip()
        if not s or _BORDER.match(s):
            continue
        if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
            raise ParseError(what, s, hint="expected the boxed table nvidia-smi prints")
        inner = s[1:-1].strip()
        if inner in titles:
            titled = True
            continue
        if (
            not inner
            or any(inner.startswith(h) for h in headers)
            or re.match(r"^(ID|Instance|Free/Total)\b", inner)
        ):
            continue
        rows.append(inner)
    return rows, titled


def parse_mig_lgip(text: str) -> list[MigProfileRow]:
    """``nvidia-smi mig -lgip``: the GI profiles of each GPU with free/total counts."""
    rows, titled = _box_rows(
        text, "nvidia-smi mig -lgip output", ("GPU instance profiles:",), ("GPU   Name",)
    )
    out: list[MigProfileRow] = []
    pending: MigProfileRow | None = None
    for inner in rows:
        m = re.match(
            r"^(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)$",
            inner,
        )
        if m:
            if pending is not None:
                raise ParseError(
                    "nvidia-smi mig -lgip row", inner, hint="a profile row lacks its CE/JPEG/OFA line"
                )
            parse_profile_name(m.group(2))
            free, total = int(m.group(4)), int(m.group(5))
            if free > total:
                raise ParseError(
                    "nvidia-smi mig -lgip instances", f"{free}/{total}", hint="free exceeds total"
                )
            pending = MigProfileRow(
                int(m.group(1)),
                m.group(2),
                int(m.group(3)),
                free,
                total,
                float(m.group(6)),
                m.group(7) == "Yes",
                int(m.group(8)),
                int(m.group(9)),
                int(m.group(10)),
            )
            continue
        c = re.match(r"^(\d+)\s+(\d+)\s+(\d+)$", inner)
        if c and pending is not None:
            out.append(
                MigProfileRow(
                    **{
                        **pending.__dict__,
                        "ce": int(c.group(1)),
                        "jpeg": int(c.group(2)),
                        "ofa": int(c.group(3)),
                    }
                )
            )
            pending = None
            continue
        raise ParseError(
            "nvidia-smi mig -lgip row",
            inner,
            hint="expected '<gpu> MIG <profile> <id> <free>/<total> <GiB> <P2P> <SM> <DEC> <ENC>'",
        )
    if pending is not None:
        out.append(pending)
        _warn(f"nvidia-smi mig -lgip: the last row ({pending.name}) lacks its CE/JPEG/OFA line")
    if not out:
        raise ParseError("nvidia-smi mig -lgip output", text, hint="no profile rows found")
    if not titled:
        _warn("nvidia-smi mig -lgip: no table title; the capture starts mid-table")
    return out


def parse_mig_lgipp(text: str) -> dict[int, dict[int, tuple[tuple[int, ...], int]]]:
    """``nvidia-smi mig -lgipp``: GPU -> profile id -> (allowed starts, size) in memory slices."""
    out: dict[int, dict[int, tuple[tuple[int, ...], int]]] = {}
    for s in _nonblank_lines(text):
        m = re.match(r"^GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}:(\d+)$", s)
        if m is None:
            raise ParseError(
                "nvidia-smi mig -lgipp line",
                s,
                hint="expected 'GPU <n> Profile ID <id> Placements: {0,2,4}:2'",
            )
        # any whitespace (a tab too) may sit around the commas; two numbers without a comma are no placement
        parts = [x.strip() for x in m.group(3).split(",")]
        if not all(x.isdecimal() for x in parts if x):
            raise ParseError(
                "nvidia-smi mig -lgipp placements", s, hint="expected starts separated by commas"
            )
        starts = tuple(int(x) for x in parts if x)
        if not starts:
            raise ParseError("nvidia-smi mig -lgipp placements", s, hint="no placement start listed")
        out.setdefault(int(m.group(1)), {})[int(m.group(2))] = (starts, int(m.group(4)))
    if not out:
        raise ParseError("nvidia-smi mig -lgipp output", text, hint="no 'Profile ID' lines found")
    return out


def parse_mig_lgi(text: str, *, gpu_model: str | None = None) -> MigLayout:
    """``nvidia-smi mig -lgi``: the GPU instances, their profiles, ids and placements."""
    rows, titled = _box_rows(text, "nvidia-smi mig -lgi output", ("GPU instances:",), ("GPU   Name",))
    per_gpu: dict[int, list[GpuInstance]] = {}
    for inner in rows:
        m = re.match(r"^(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)$", inner)
        if m is None:
            raise ParseError(
                "nvidia-smi mig -lgi row",
                inner,
                hint="expected '<gpu> MIG <profile> <profile id> <instance id> <start>:<size>'",
            )
        _ci, gi_c, _gb, _me = parse_profile_name(m.group(2))
        gpu = int(m.group(1))
        gi_id = int(m.group(4))
        if any(i.gi_id == gi_id for i in per_gpu.get(gpu, [])):
            raise ParseError("nvidia-smi mig -lgi row", inner, hint=f"GPU instance {gi_id} appears twice")
        per_gpu.setdefault(gpu, []).append(
            GpuInstance(
                gpu=gpu,
                profile=m.group(2),
                compute_slices=gi_c,
                gi_id=gi_id,
                profile_id=int(m.group(3)),
                start=int(m.group(5)),
                size=int(m.group(6)),
            )
        )
    if not per_gpu:
        raise ParseError("nvidia-smi mig -lgi output", text, hint="no GPU instance rows found")
    if not titled:
        _warn("nvidia-smi mig -lgi: no table title; the capture starts mid-table")
    choice = choose_table([i.profile for v in per_gpu.values() for i in v], gpu_model)
    gpus = tuple(GpuMig(index=g, instances=tuple(v), model=choice.model) for g, v in sorted(per_gpu.items()))
    return MigLayout(gpus=gpus, table=choice.table, complete=titled, notes=choice.notes, fits=choice.fits)


def parse_mig_lci(text: str) -> list[tuple[int, int, ComputeInstance, tuple[int, int] | None]]:
    """``nvidia-smi mig -lci``: (GPU, GI id, compute instance, CI placement start:size or None)."""
    rows, _titled = _box_rows(text, "nvidia-smi mig -lci output", ("Compute instances:",), ("GPU     GPU",))
    out: list[tuple[int, int, ComputeInstance, tuple[int, int] | None]] = []
    for inner in rows:
        m = re.match(r"^(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?$", inner)
        if m is None:
            if re.match(r"^ID\b", inner):
                continue
            raise ParseError(
                "nvidia-smi mig -lci row",
                inner,
                hint="expected '<gpu> <gi id> MIG <profile> <profile id> <ci id> [<start>:<size>]'",
            )
        ci_c, gi_c, _gb, _me = parse_profile_name(m.group(3))
        ci = ComputeInstance(
            ci_id=int(m.group(5)), name=m.group(3), compute_slices=ci_c or gi_c, profile_id=int(m.group(4))
        )
        place = (int(m.group(6)), int(m.group(7))) if m.group(6) else None
        out.append((int(m.group(1)), int(m.group(2)), ci, place))
    if not out:
        raise ParseError("nvidia-smi mig -lci output", text, hint="no compute instance rows found")
    return out


def parse_mig_cgi_log(text: str, *, gpu_model: str | None = None) -> MigLayout:
    """The log of ``nvidia-smi mig -cgi ... -C``: the GIs and CIs it created (placements not shown)."""
    per_gpu: dict[int, dict[int, GpuInstance]] = {}
    for s in _nonblank_lines(text):
        g = re.match(
            r"^Successfully created GPU instance ID\s+(\d+) on GPU\s+(\d+) using profile MIG (\S+) "
            r"\(ID\s+(\d+)\)$",
            s,
        )
        c = re.match(
            r"^Successfully created compute instance ID\s+(\d+) on GPU\s+(\d+) GPU instance ID\s+(\d+) "
            r"using profile MIG (\S+) \(ID\s+(\d+)\)$",
            s,
        )
        if g:
            gi_id, gpu, name, pid = int(g.group(1)), int(g.group(2)), g.group(3), int(g.group(4))
            per_gpu.setdefault(gpu, {})[gi_id] = GpuInstance(
                gpu=gpu, profile=name, compute_slices=parse_profile_name(name)[1], gi_id=gi_id, profile_id=pid
            )
        elif c:
            ci_id, gpu, gi_id, name, pid = (
                int(c.group(1)),
                int(c.group(2)),
                int(c.group(3)),
                c.group(4),
                int(c.group(5)),
            )
            gi = per_gpu.get(gpu, {}).get(gi_id)
            if gi is None:
                raise ParseError(
                    "nvidia-smi mig -cgi log line",
                    s,
                    hint=f"compute instance on GPU instance {gi_id}, which the log did not create",
                )
            ci_c, gi_c, _gb, _me = parse_profile_name(name)
            ci = ComputeInstance(ci_id=ci_id, name=name, compute_slices=ci_c or gi_c, profile_id=pid)
            per_gpu[gpu][gi_id] = GpuInstance(
                **{**gi.__dict__, "compute_instances": (*gi.compute_instances, ci)}
            )
        else:
            raise ParseError(
                "nvidia-smi mig -cgi log line",
                s,
                hint="expected 'Successfully created GPU|compute instance ...'",
            )
    if not per_gpu:
        raise ParseError("nvidia-smi mig -cgi log", text, hint="no 'Successfully created' lines found")
    choice = choose_table([i.profile for v in per_gpu.values() for i in v.values()], gpu_model)
    gpus = tuple(
        GpuMig(index=g, instances=tuple(v.values()), model=choice.model) for g, v in sorted(per_gpu.items())
    )
    return MigLayout(
        gpus=gpus,
        table=choice.table,
        fits=choice.fits,
        notes=(
            "placements are not in the -cgi log; shown where they fit, largest first (inferred)",
            *choice.notes,
        ),
    ).with_inferred_placements()


@dataclass(frozen=True)
class MigDevice:
    """A row of the "MIG devices" table of plain ``nvidia-smi``."""

    gpu: int
    gi_id: int
    ci_id: int
    mig_dev: int
    memory_used_mib: int | None  # None where the cell is merged with the row above (CIs sharing a GI)
    memory_total_mib: int | None
    sm: int | None


def parse_mig_devices(text: str) -> list[MigDevice]:
    """The "MIG devices" section of ``nvidia-smi`` (the "Processes" section after it is skipped)."""
    out: list[MigDevice] = []
    seen_title = False
    for raw in _clean(text):
        s = raw.strip()
        if not s or _BORDER.match(s) or re.match(r"^\+[-=+ ]+\+$", s):
            continue
        if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
            raise ParseError(
                "nvidia-smi MIG devices line", s, hint="expected the boxed table nvidia-smi prints"
            )
        inner = s[1:-1].strip()
        if inner == "MIG devices:":
            seen_title = True
            continue
        if inner == "Processes:":
            break
        cells = [c.strip() for c in s[1:-1].split("|")]
        m = re.match(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", cells[0])
        if m is None:
            if cells[0] == "" or cells[0].startswith(("GPU", "ID")) or re.match(r"^[=+]+$", inner):
                continue  # header lines and the BAR1 line newer drivers print under each device
            raise ParseError(
                "nvidia-smi MIG devices row", inner, hint="expected '<gpu> <gi> <ci> <mig dev> | ...'"
            )
        used = total = sm = None
        if len(cells) > 1 and cells[1]:
            mm = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", cells[1])
            if mm is None:
                raise ParseError(
                    "nvidia-smi MIG devices memory cell", cells[1], hint="expected '<used>MiB / <total>MiB'"
                )
            used, total = int(mm.group(1)), int(mm.group(2))
        if len(cells) > 2 and cells[2]:
            sm_m = re.match(r"^(\d+)\b", cells[2])
            if sm_m is None:
                raise ParseError(
                    "nvidia-smi MIG devices SM cell", cells[2], hint="expected '<SM count> <ECC>'"
                )
            sm = int(sm_m.group(1))
        out.append(
            MigDevice(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), used, total, sm)
        )
    if not out:
        raise ParseError("nvidia-smi MIG devices table", text, hint="no MIG device rows found")
    if not seen_title:
        _warn("nvidia-smi MIG devices: no 'MIG devices:' title; the capture starts mid-table")
    return out
