"""Parser of ``nvidia-smi -L``: the GPUs and MIG devices of a node, and the MIG layout they imply."""

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
from slurmlab.core.gpu.smi._text import GPU_LINE as _GPU_LINE
from slurmlab.core.gpu.smi._text import nonblank_lines as _nonblank_lines
from slurmlab.errors import ParseError

__all__ = ["SmiDevice", "parse_smi_list"]


@dataclass(frozen=True)
class SmiDevice:
    """A line of ``nvidia-smi -L``: a GPU, or a MIG device under ``parent``."""

    index: int
    name: str
    uuid: str
    parent: int | None = None  # GPU index for a MIG device


def parse_smi_list(text: str, *, gpu_model: str | None = None) -> tuple[list[SmiDevice], MigLayout | None]:
    """``nvidia-smi -L``: the devices, and a MIG layout (placements inferred) when MIG devices are listed.

    The listing names each GPU's model, which picks the profile table; ``gpu_model`` is for a listing whose name
    has no known table, and is refused when it contradicts the name the listing prints."""
    devices: list[SmiDevice] = []
    gpu_rows: dict[int, tuple[str, str]] = {}
    mig_rows: dict[int, list[tuple[int, str, str]]] = {}
    current: int | None = None
    for s in _nonblank_lines(text):
        m = _GPU_LINE.match(s)
        if m:
            current = int(m.group(1))
            if current in gpu_rows:
                raise ParseError("nvidia-smi -L line", s, hint=f"GPU {current} is listed twice")
            gpu_rows[current] = (m.group(2), m.group(3))
            devices.append(SmiDevice(current, m.group(2), m.group(3)))
            mig_rows[current] = []
            continue
        mm = re.match(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)$", s)
        if mm and current is not None:
            parse_profile_name(mm.group(1))
            mig_rows[current].append((int(mm.group(2)), mm.group(1), mm.group(3)))
            devices.append(SmiDevice(int(mm.group(2)), mm.group(1), mm.group(3), parent=current))
            continue
        raise ParseError(
            "nvidia-smi -L line",
            s,
            hint="expected 'GPU <n>: <name> (UUID: GPU-...)' or 'MIG <profile> Device <n>: (UUID: MIG-...)'",
        )
    if not devices:
        raise ParseError("nvidia-smi -L output", text, hint="no GPU lines found")
    if not any(mig_rows.values()):
        return devices, None
    gpus = []
    names = []
    for idx, (model, uuid) in gpu_rows.items():
        insts = _instances_from_listing(idx, mig_rows[idx])
        names += [i.profile for i in insts]
        gpus.append(GpuMig(index=idx, instances=tuple(insts), model=model, uuid=uuid))
    choice = choose_table(names, gpu_model, named=next(iter(gpu_rows.values()))[0])
    layout = MigLayout(
        gpus=tuple(gpus),
        table=choice.table,
        fits=choice.fits,
        notes=(
            "placements are not in `nvidia-smi -L`; shown where they fit, largest first (inferred)",
            *choice.notes,
        ),
    )
    return devices, layout.with_inferred_placements()


def _instances_from_listing(gpu: int, rows: list[tuple[int, str, str]]) -> list[GpuInstance]:
    """Group -L's MIG devices into GPU instances: ``<c>c.<gi>`` CIs fill a GI until its compute is used."""
    out: list[GpuInstance] = []
    open_gi: dict[str, list[ComputeInstance]] = {}
    for dev, name, uuid in rows:
        ci_c, gi_c, _gb, _me = parse_profile_name(name)
        gi_name = name.split(".", 1)[1] if ci_c is not None else name
        ci = ComputeInstance(ci_id=None, name=name, compute_slices=ci_c or gi_c, uuid=uuid, device=dev)
        if ci_c is None:
            out.append(GpuInstance(gpu=gpu, profile=name, compute_slices=gi_c, compute_instances=(ci,)))
            continue
        group = open_gi.setdefault(gi_name, [])
        if sum(c.compute_slices for c in group) + ci.compute_slices > gi_c:
            out.append(
                GpuInstance(gpu=gpu, profile=gi_name, compute_slices=gi_c, compute_instances=tuple(group))
            )
            group = open_gi[gi_name] = []
        group.append(ci)
    for gi_name, group in open_gi.items():
        if group:
            gi_c = parse_profile_name(gi_name)[1]
            out.append(
                GpuInstance(gpu=gpu, profile=gi_name, compute_slices=gi_c, compute_instances=tuple(group))
            )
    return out
