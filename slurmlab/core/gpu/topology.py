"""GPU topology of one node: GPUs, NICs, NUMA/CPU affinity and the links between them.

The model is what ``nvidia-smi topo -m`` shows (parsed in :mod:`slurmlab.core.gpu.smi`) or what a sandbox
hardware profile declares (:meth:`Topology.from_profile`). Pure data, no I/O.

Its parts live in their own modules: the devices and CPU lists (:mod:`.devices`), the links (:mod:`.links`), the
NVLink facts per model and generation (:mod:`.nvlink.models`); the kind of fabric and its bandwidth are judged in
:mod:`.nvlink.fabric`, each link's state (``nvidia-smi nvlink -s``) in :mod:`.nvlink.state`; a profile is read by
:mod:`.topology_profile`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slurmlab.core.gpu.devices import Gpu, Nic, format_cpu_list
from slurmlab.core.gpu.links import Link
from slurmlab.core.gpu.nvlink import (
    NVLINK_GENERATIONS,
    GpuLinkState,
    NvlinkFabric,
    NvlinkGeneration,
    link_state_lines,
    link_states,
    nvlink_fabric,
    nvlink_generation_for_model,
    nvlink_model_for,
)
from slurmlab.core.gpu.quoting import quoted
from slurmlab.core.gpu.topology_profile import read_profile
from slurmlab.errors import ParseError

if TYPE_CHECKING:
    from slurmlab.core.gpu.smi.nvlink import NvlinkStatus

__all__ = ["Topology"]


@dataclass(frozen=True)
class Topology:
    """One node's GPUs, NICs and the link between every pair of devices."""

    gpus: tuple[Gpu, ...]
    nics: tuple[Nic, ...] = ()
    links: tuple[Link, ...] = ()  # one per unordered pair of distinct devices that the source shows
    complete: bool = True  # False when the source was truncated
    notes: tuple[str, ...] = ()
    gpu_model: str | None = None
    nvlink_generation: NvlinkGeneration | None = None
    link_states: tuple[GpuLinkState, ...] = ()  # each GPU's links as `nvidia-smi nvlink -s` reported them
    _index: dict[frozenset[str], Link] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for link in self.links:
            self._index[frozenset((link.a, link.b))] = link

    # ---- lookups -------------------------------------------------------------------------------------
    def gpu(self, index: int) -> Gpu:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"no GPU {index} in this topology (GPUs: {[g.index for g in self.gpus]})")

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.gpus) + tuple(n.name for n in self.nics)

    def link(self, a: str | int, b: str | int) -> Link | None:
        """The link between two devices (GPU indices or names); None when the source does not show it."""
        return self._index.get(frozenset((_name(a), _name(b))))

    def nvlinks(self, a: int, b: int) -> int:
        link = self.link(a, b)
        return link.nvlinks if link is not None else 0

    def gpu_links(self) -> list[Link]:
        gpu_names = {g.name for g in self.gpus}
        return [lk for lk in self.links if lk.a in gpu_names and lk.b in gpu_names]

    def nvlink_edges(self) -> list[Link]:
        return [lk for lk in self.gpu_links() if lk.is_nvlink]

    def nvlinks_per_gpu(self, index: int) -> int:
        name = f"GPU{index}"
        return sum(lk.nvlinks for lk in self.nvlink_edges() if name in (lk.a, lk.b))

    def bandwidth_gbps(self, a: int, b: int, *, bidirectional: bool = False) -> float | None:
        """NVLink bandwidth between two GPUs as the hardware allows (on a switch: a GPU's full figure, less its
        inactive links); None when unknown or not NVLink."""
        return self.fabric().pair_gbps(a, b, bidirectional=bidirectional)

    def fabric(self) -> NvlinkFabric:
        """The kind of GPU interconnect (switched / direct NVLink / PCIe only), why, and its bandwidth figures."""
        return nvlink_fabric(self)

    def link_state(self, index: int) -> GpuLinkState | None:
        """GPU ``index``'s links as ``nvidia-smi nvlink -s`` reported them; None when not read."""
        return next((s for s in self.link_states if s.gpu == index), None)

    def with_nvlink_status(self, statuses: Sequence[NvlinkStatus]) -> Topology:
        """A copy carrying each GPU's link state from parsed ``nvidia-smi nvlink -s`` (``parse_nvlink_status``),
        and the GPU model/UUIDs it names where this topology has none."""
        states = link_states(statuses)
        known = {g.index for g in self.gpus}
        stray = sorted({s.gpu for s in states} - known)
        if stray:
            raise ParseError(
                "nvidia-smi nvlink -s output",
                f"GPU {', '.join(map(str, stray))}",
                hint=f"the topology has GPUs {', '.join(map(str, sorted(known)))}: were both captures taken on "
                "the same node, in the same job (a job sees its GPUs numbered from 0)?",
            )
        for s in states:
            widest = max(
                (lk.nvlinks for lk in self.nvlink_edges() if f"GPU{s.gpu}" in (lk.a, lk.b)), default=0
            )
            if widest > s.total:
                # a pair's NV# can never exceed the links its GPU has, switched or not
                raise ParseError(
                    "nvidia-smi nvlink -s output",
                    f"GPU {s.gpu}: {s.model}, {s.total} links",
                    hint=f"the topology shows GPU{s.gpu} with NV{widest} to a peer: the captures "
                    "come from different nodes; take both on the same node",
                )
            uuid = self.gpu(s.gpu).uuid
            if uuid and uuid != s.uuid:
                raise ParseError(
                    "nvidia-smi nvlink -s output",
                    f"GPU {s.gpu}: {s.uuid}",
                    hint=f"the topology's GPU{s.gpu} is {uuid}: the captures come from different "
                    "GPUs; take both on the same node",
                )
        topo = (
            self
            if self.gpu_model
            else self.with_gpu_details({s.gpu: (s.model, s.uuid) for s in states if not self.gpu(s.gpu).uuid})
        )
        return dataclasses.replace(topo, link_states=states)

    def numa_groups(self) -> dict[str, tuple[int, ...]]:
        """GPUs grouped by their NUMA affinity (or CPU affinity when NUMA is N/A); label -> GPU indices."""
        groups: dict[str, list[int]] = {}
        for g in self.gpus:
            groups.setdefault(g.numa_label, []).append(g.index)
        return {k: tuple(v) for k, v in groups.items()}

    def numa_nodes(self) -> frozenset[int]:
        out: set[int] = set()
        for g in self.gpus:
            out |= g.numa_affinity or frozenset()
        return frozenset(out)

    def closest_nics(self, index: int) -> list[tuple[Nic, Link]]:
        """NICs ordered from closest to farthest from GPU ``index``."""
        found = []
        for nic in self.nics:
            link = self.link(index, nic.name)
            if link is not None:
                found.append((nic, link))
        return sorted(found, key=lambda p: (p[1].kind.rank, p[0].name))

    def guess_nvlink_generation(self) -> NvlinkGeneration | None:
        """The NVLink generation implied by the model name or, failing that, by the link counts."""
        if self.gpu_model:
            gen = nvlink_generation_for_model(self.gpu_model)
            if gen is not None:
                return gen
        edges = self.nvlink_edges()
        if not edges:
            return None
        most = max(lk.nvlinks for lk in edges)
        per_gpu = max(self.nvlinks_per_gpu(g.index) for g in self.gpus)
        if most == 18:
            return NVLINK_GENERATIONS["nvlink4"]
        if most == 12:
            return NVLINK_GENERATIONS["nvlink3"]
        if most <= 3 and per_gpu <= 6:
            return NVLINK_GENERATIONS["nvlink2"]  # DGX-1 hybrid cube mesh, POWER9 AC922 pairs
        if most == 6 and per_gpu == 18:
            return NVLINK_GENERATIONS["nvlink4"]  # GH200: 18 links spread over 3 peers
        if most == 6 and per_gpu > 18:
            return NVLINK_GENERATIONS["nvlink2"]  # DGX-2/HGX-2: each V100's 6 links go to the NVSwitch fabric
        return None  # NV4 bridges, NV8 (A800/H800)...: the count alone does not tell

    def with_model(self, model: str | None) -> Topology:
        """A copy carrying the GPU model name (and the NVLink generation it implies)."""
        tmp = dataclasses.replace(self, gpu_model=model, nvlink_generation=None)
        tmp = dataclasses.replace(tmp, nvlink_generation=tmp.guess_nvlink_generation())
        # the yardstick of a link's speed is the model's: judge the links again under the new name
        return dataclasses.replace(
            tmp,
            link_states=tuple(
                dataclasses.replace(s, expected_gbps=_expected_speed(model, s)) for s in self.link_states
            ),
        )

    def with_gpu_details(self, details: Mapping[int, tuple[str | None, str | None]]) -> Topology:
        """A copy with GPU model names and UUIDs (e.g. from ``nvidia-smi -L``): index -> (model, uuid)."""
        unknown = sorted(set(details) - {g.index for g in self.gpus})
        if unknown:
            raise ParseError("GPU details", quoted(unknown), hint="these GPU indices are not in the topology")
        gpus = tuple(
            dataclasses.replace(g, model=details[g.index][0] or g.model, uuid=details[g.index][1] or g.uuid)
            if g.index in details
            else g
            for g in self.gpus
        )
        models = {g.model for g in gpus if g.model}
        tmp = dataclasses.replace(self, gpus=gpus)
        return tmp.with_model(models.pop()) if len(models) == 1 else tmp

    # ---- profiles ------------------------------------------------------------------------------------
    @classmethod
    def from_profile(cls, data: Mapping[str, object]) -> Topology:
        """Build a topology from plain hardware-profile data (the sandbox profile JSON schema).

        Used keys (others are ignored)::

            {"gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "numa": 0, "cores": "0-55"}, ...],
             "nvlink": [[0, 18, ...], [18, 0, ...], ...],   # N x N link counts (or {"0-1": 18} or "all:18")
             "pcie": {"0-1": "PIX"},                         # optional non-NVLink relations
             "nics": [{"name": "mlx5_0", "near": [0, 1]}],   # optional
             "gpu_model": "H100"}                            # optional; else the first GPU's name

        Pairs without NVLink or a ``pcie`` entry are NODE within one NUMA node and SYS across.
        """
        parts = read_profile(data)
        topo = Topology(
            gpus=parts.gpus, nics=parts.nics, links=parts.links, notes=("built from a hardware profile",)
        )
        return topo.with_model(parts.model)

    def summary(self) -> str:
        """A readable multi-line summary for terminals."""
        lines = []
        model = f" ({self.gpu_model})" if self.gpu_model else ""
        lines.append(f"{len(self.gpus)} GPUs{model}, {len(self.nics)} NICs")
        if self.nvlink_generation:
            lines.append(f"NVLink generation: {self.nvlink_generation.name}")
        for label, idx in self.numa_groups().items():
            gpus = [self.gpu(i) for i in idx]
            cpus = gpus[0].cpu_affinity
            cpu_txt = format_cpu_list(cpus) if cpus else "(not shown)"
            where = f"{label}: GPUs {', '.join(str(i) for i in idx)}"
            lines.append(f"  {where}" if label.startswith("CPUs") else f"  {where}; CPUs {cpu_txt}")
        nv = self.nvlink_edges()
        fabric = self.fabric()
        if nv:
            counts: dict[int, int] = {}
            for lk in nv:
                counts[lk.nvlinks] = counts.get(lk.nvlinks, 0) + 1
            desc = ", ".join(f"{c} pairs NV{n}" for n, c in sorted(counts.items(), reverse=True))
            lines.append(
                f"NVLink: {desc}"
                + (
                    " (as topo -m prints it: each is a path through the switch, not a cable)"
                    if fabric.switched
                    else ""
                )
            )
        else:
            lines.append("NVLink: none (PCIe only)")
        lines.extend(fabric.lines())
        lines.extend(link_state_lines(self.link_states))
        lines.append("GPU matrix:")
        names = [g.name for g in self.gpus]
        width = max([len(n) for n in names] + [4]) + 1
        lines.append(" " * width + "".join(n.rjust(width) for n in names))
        for a in names:
            row = []
            for b in names:
                cell = self.link(a, b)
                row.append(("X" if a == b else (cell.short if cell else "?")).rjust(width))
            lines.append(a.ljust(width) + "".join(row))
        for g in self.gpus:
            near = self.closest_nics(g.index)
            if near:
                best = near[0][1].kind
                nics = [n.device for n, lk in near if lk.kind is best]
                lines.append(f"  GPU{g.index} closest NICs ({best.value}): {', '.join(nics)}")
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)


def _expected_speed(model: str | None, state: GpuLinkState) -> float | None:
    """A link's yardstick under ``model``: its per-link speed, else the one the state already had."""
    row = nvlink_model_for(model) or nvlink_model_for(state.model)
    return row.reported_gbps if row else state.expected_gbps


def _name(x: str | int) -> str:
    return f"GPU{x}" if isinstance(x, int) else x
