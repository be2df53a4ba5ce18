"""GPU topology of one node: GPUs, NICs, NUMA/CPU affinity and the links between them.

The model is what ``nvidia-smi topo -m`` shows (parsed in :mod:`slurmlab.core.gpu.smi_parse`) or what a sandbox
hardware profile declares (:meth:`Topology.from_profile`). Pure data, no I/O.

Its parts live in their own modules and are importable from here too: the devices and CPU lists
(:mod:`.devices`), the links (:mod:`.links`), the NVLink generations (:mod:`.nvlink`); a profile is read by
:mod:`.topology_profile`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from slurmlab.core.gpu.devices import Gpu, Nic, format_cpu_list, parse_cpu_list
from slurmlab.core.gpu.links import Link, LinkKind
from slurmlab.core.gpu.nvlink import NVLINK_GENERATIONS, NvlinkGeneration, nvlink_generation_for_model
from slurmlab.core.gpu.quoting import quoted
from slurmlab.core.gpu.topology_profile import read_profile
from slurmlab.errors import ParseError

__all__ = [
    "NVLINK_GENERATIONS",
    "Gpu",
    "Link",
    "LinkKind",
    "Nic",
    "NvlinkGeneration",
    "Topology",
    "format_cpu_list",
    "nvlink_generation_for_model",
    "parse_cpu_list",
]


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
        """NVLink bandwidth between two GPUs by generation; None when unknown or not NVLink."""
        n = self.nvlinks(a, b)
        if n == 0 or self.nvlink_generation is None:
            return None
        return self.nvlink_generation.bandwidth_gbps(n, bidirectional=bidirectional)

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
        return None  # NV4 bridges, NV6 NVSwitch boxes...: the count alone does not tell

    def with_model(self, model: str | None) -> Topology:
        """A copy carrying the GPU model name (and the NVLink generation it implies)."""
        tmp = dataclasses.replace(self, gpu_model=model, nvlink_generation=None)
        return dataclasses.replace(tmp, nvlink_generation=tmp.guess_nvlink_generation())

    def with_gpu_details(self, details: Mapping[int, tuple[str | None, str | None]]) -> Topology:
        """A copy with GPU model names and UUIDs (e.g. from ``nvidia-smi -L``): index -> (model, uuid)."""
        unknown = sorted(set(details) - {g.index for g in self.gpus})
        if unknown:
            raise ParseError("GPU details", quoted(unknown), hint="these GPU indices are not in the topology")
        gpus = tuple(
            dataclasses.replace(g, model=details[g.index][0] or g.model, uuid=details[g.index][1] or g.uuid)
            if g.index in details else g
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
        topo = Topology(gpus=parts.gpus, nics=parts.nics, links=parts.links, notes=("built from a hardware profile",))
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
        if nv:
            counts: dict[int, int] = {}
            for lk in nv:
                counts[lk.nvlinks] = counts.get(lk.nvlinks, 0) + 1
            desc = ", ".join(f"{c} pairs NV{n}" for n, c in sorted(counts.items(), reverse=True))
            lines.append(f"NVLink: {desc}")
        else:
            lines.append("NVLink: none (PCIe only)")
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


def _name(x: str | int) -> str:
    return f"GPU{x}" if isinstance(x, int) else x
