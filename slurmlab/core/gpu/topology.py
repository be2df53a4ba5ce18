"""GPU topology of one node: GPUs, NICs, NUMA/CPU affinity and the links between them.

The model is what ``nvidia-smi topo -m`` shows (parsed in :mod:`slurmlab.core.gpu.smi_parse`) or what a sandbox
hardware profile declares (:meth:`Topology.from_profile`). Pure data, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.slurm.ranges import parse_index_list, render_index_list
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


class LinkKind(enum.Enum):
    """How two devices connect, best first (``topo -m`` legend)."""

    SELF = "X"
    NVLINK = "NV"
    PIX = "PIX"  # at most one PCIe bridge
    PXB = "PXB"  # several PCIe bridges, no host bridge
    PHB = "PHB"  # through a PCIe host bridge (the CPU)
    NODE = "NODE"  # between host bridges inside one NUMA node
    SYS = "SYS"  # across the SMP interconnect between NUMA nodes (old drivers: SOC)

    @property
    def rank(self) -> int:
        """Lower is closer; used to order and compare links."""
        return list(LinkKind).index(self)

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    LinkKind.SELF: "self",
    LinkKind.NVLINK: "bonded set of NVLinks",
    LinkKind.PIX: "PCIe, at most one bridge",
    LinkKind.PXB: "PCIe, several bridges (no host bridge)",
    LinkKind.PHB: "PCIe through a host bridge (CPU)",
    LinkKind.NODE: "PCIe between host bridges in one NUMA node",
    LinkKind.SYS: "PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI)",
}

_LINK_RE = re.compile(r"^(?:(X)|NV(\d{1,3})|(PIX|PXB|PHB|NODE|SYS|SOC))$")


@dataclass(frozen=True)
class Link:
    """The connection between devices ``a`` and ``b`` (names as in the matrix, e.g. ``GPU0``, ``NIC3``)."""

    a: str
    b: str
    kind: LinkKind
    nvlinks: int = 0  # bonded NVLinks when kind is NVLINK
    label: str = ""  # the token as printed (keeps "SOC" of old drivers)

    @classmethod
    def from_token(cls, a: str, b: str, token: str) -> Link:
        """Build a link from a ``topo -m`` cell; an unknown token is a :class:`ParseError`."""
        m = _LINK_RE.match(token)
        if m is None:
            raise ParseError(
                f"topology link between {a} and {b}",
                token,
                hint="expected X, NV<n>, PIX, PXB, PHB, NODE, SYS or SOC (nvidia-smi topo -m legend)",
            )
        if m.group(1):
            return cls(a, b, LinkKind.SELF, 0, token)
        if m.group(2):
            n = int(m.group(2))
            if n < 1:
                raise ParseError(f"topology link between {a} and {b}", token, hint="NV<n> needs n >= 1")
            return cls(a, b, LinkKind.NVLINK, n, token)
        word = m.group(3)
        return cls(a, b, LinkKind.SYS if word == "SOC" else LinkKind(word), 0, token)

    @property
    def is_nvlink(self) -> bool:
        return self.kind is LinkKind.NVLINK

    @property
    def short(self) -> str:
        return f"NV{self.nvlinks}" if self.is_nvlink else self.kind.value

    def other(self, name: str) -> str:
        return self.b if name == self.a else self.a


@dataclass(frozen=True)
class NvlinkGeneration:
    """Per-link NVLink figures of one generation (DESIGN §4, FACTS-mig-nvlink.md)."""

    name: str
    gpus: tuple[str, ...]
    links_per_gpu: int
    reported_gbps: float  # what `nvidia-smi nvlink -s` prints per link
    per_direction_gbps: float  # spec, one direction, per link

    def bandwidth_gbps(self, links: int, *, bidirectional: bool = False) -> float:
        """Spec bandwidth of ``links`` bonded links (one direction unless ``bidirectional``)."""
        return links * self.per_direction_gbps * (2 if bidirectional else 1)


NVLINK_GENERATIONS: dict[str, NvlinkGeneration] = {
    "nvlink1": NvlinkGeneration("NVLink 1", ("P100",), 4, 20.0, 20.0),
    "nvlink2": NvlinkGeneration("NVLink 2", ("V100",), 6, 25.781, 25.0),
    "nvlink3": NvlinkGeneration("NVLink 3", ("A100", "A800", "A30"), 12, 25.0, 25.0),
    "nvlink3-bridge": NvlinkGeneration("NVLink 3 bridge", ("RTX 3090", "A6000", "A40"), 4, 14.062, 14.0625),
    "nvlink4": NvlinkGeneration("NVLink 4", ("H100", "H200", "H20", "H800", "GH200"), 18, 26.562, 25.0),
    "nvlink5": NvlinkGeneration("NVLink 5", ("B200", "B100", "GB200"), 18, 53.125, 50.0),
}


def nvlink_generation_for_model(model: str) -> NvlinkGeneration | None:
    """The NVLink generation of a GPU model name such as ``NVIDIA H100 80GB HBM3`` (None if unknown)."""
    text = model.upper().replace("-", " ")
    best: tuple[int, NvlinkGeneration] | None = None
    for gen in NVLINK_GENERATIONS.values():
        for gpu in gen.gpus:
            if re.search(rf"(?<![A-Z0-9]){re.escape(gpu.upper())}(?![0-9])", text):
                # the longest match wins: "GH200" over "H200"? no such overlap thanks to the lookbehind
                if best is None or len(gpu) > best[0]:
                    best = (len(gpu), gen)
    return best[1] if best else None


def parse_cpu_list(text: str, *, what: str = "CPU list") -> frozenset[int]:
    """``0-15,32-47`` / ``4,6,9`` -> the set of ids; an empty string is the empty set."""
    return frozenset(parse_index_list(text, what))


def format_cpu_list(ids: Iterable[int]) -> str:
    """The compact form of a set of ids: ``{0,1,2,5}`` -> ``0-2,5``."""
    return render_index_list(sorted(set(ids)))


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str  # as in the matrix: GPU0
    cpu_affinity: frozenset[int] | None = None  # None: the capture left the cell empty or had no column
    numa_affinity: frozenset[int] | None = None  # None: N/A or absent
    gpu_numa_id: int | None = None  # GH200/Grace: the GPU memory's own NUMA node
    model: str | None = None
    uuid: str | None = None

    @property
    def numa_label(self) -> str:
        if self.numa_affinity:
            return "NUMA " + format_cpu_list(self.numa_affinity)
        if self.cpu_affinity:
            return "CPUs " + format_cpu_list(self.cpu_affinity)
        return "NUMA ?"


@dataclass(frozen=True)
class Nic:
    name: str  # column name: NIC0 or mlx5_0
    device: str  # the device from the NIC legend (mlx5_2), or the column name itself


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
            raise ParseError("GPU details", _show(unknown), hint="these GPU indices are not in the topology")
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
        return _from_profile(data)

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


# no node holds more GPUs or NICs than this; a profile that says so would build n^2 links
_MAX_DEVICES = 256


def _show(value: object) -> str:
    """repr() for an error message: short, and safe on ints too long for repr()."""
    try:
        return repr(value)[:200]
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large or deep to show>"


def _name(x: str | int) -> str:
    return f"GPU{x}" if isinstance(x, int) else x


def _as_set(value: object, what: str) -> frozenset[int] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ParseError(what, _show(value), hint="give a list of ints or a string like 0-15,32-47")
    if isinstance(value, int):
        return frozenset((value,))
    if isinstance(value, str):
        return parse_cpu_list(value, what=what)
    if isinstance(value, Sequence):
        out: set[int] = set()
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ParseError(what, _show(value), hint="give a list of ints or a string like 0-15,32-47")
            out.add(v)
        return frozenset(out)
    raise ParseError(what, _show(value), hint="give a list of ints or a string like 0-15,32-47")


def _pair(key: object, what: str) -> tuple[int, int]:
    if isinstance(key, str):
        m = re.match(r"^\s*(?:GPU)?(\d+)\s*[-,:]\s*(?:GPU)?(\d+)\s*$", key)
        if m:
            return int(m.group(1)), int(m.group(2))
    elif isinstance(key, Sequence) and len(key) == 2 and all(isinstance(v, int) for v in key):
        return int(key[0]), int(key[1])
    raise ParseError(what, _show(key), hint="name a GPU pair as '0-1' or [0, 1]")


def _from_profile(data: Mapping[str, object]) -> Topology:
    if not isinstance(data, Mapping):
        raise ParseError("hardware profile", _show(data), hint="expected a mapping (JSON object)")
    raw_gpus = data.get("gpus")
    model = data.get("gpu_model") or data.get("model")
    if not model and isinstance(raw_gpus, Sequence) and raw_gpus and isinstance(raw_gpus[0], Mapping):
        model = raw_gpus[0].get("name") or raw_gpus[0].get("model")
    gpus: list[Gpu] = []
    if isinstance(raw_gpus, int) and not isinstance(raw_gpus, bool) and 0 < raw_gpus <= _MAX_DEVICES:
        raw_gpus = [{"index": i} for i in range(raw_gpus)]
    if (not isinstance(raw_gpus, Sequence) or isinstance(raw_gpus, str) or not raw_gpus
            or len(raw_gpus) > _MAX_DEVICES):
        raise ParseError("hardware profile 'gpus'", _show(raw_gpus),
                         hint=f"give a list of GPU objects or a count (1 to {_MAX_DEVICES})")
    for pos, g in enumerate(raw_gpus):
        if not isinstance(g, Mapping):
            raise ParseError("hardware profile GPU", _show(g), hint="each GPU is an object like {'index': 0}")
        idx = g.get("index", pos)
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise ParseError("hardware profile GPU index", _show(idx), hint="index must be an int")
        cpus = g.get("cpus", g.get("cpu_affinity", g.get("cores")))
        numa = g.get("numa", g.get("numa_affinity", g.get("socket")))
        gpus.append(
            Gpu(
                index=idx,
                name=f"GPU{idx}",
                cpu_affinity=_as_set(cpus, f"CPU affinity of GPU{idx}"),
                numa_affinity=_as_set(numa, f"NUMA affinity of GPU{idx}"),
                gpu_numa_id=g.get("gpu_numa_id") if isinstance(g.get("gpu_numa_id"), int) else None,
                model=model if isinstance(model, str) else None,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
            )
        )
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise ParseError("hardware profile GPU indices", _show(indices), hint="each GPU index must be unique")

    nv: dict[frozenset[int], int] = {}
    raw_nv = data.get("nvlink", data.get("nvlinks", {}))
    if isinstance(raw_nv, str):
        m = re.match(r"^all:(\d+)$", raw_nv.strip())
        if not m:
            raise ParseError("hardware profile 'nvlink'", raw_nv, hint="use 'all:<n>', a mapping or a list")
        for i in indices:
            for j in indices:
                if i < j:
                    nv[frozenset((i, j))] = int(m.group(1))
    elif isinstance(raw_nv, Mapping):
        for k, v in raw_nv.items():
            i, j = _pair(k, "hardware profile NVLink pair")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ParseError("hardware profile NVLink count", _show(v), hint="a count of links (int)")
            nv[frozenset((i, j))] = v
    elif isinstance(raw_nv, Sequence):
        if len(raw_nv) != len(indices):
            raise ParseError("hardware profile 'nvlink'", _show(raw_nv),
                             hint=f"give an {len(indices)} x {len(indices)} matrix of link counts")
        order = [g.index for g in gpus]
        for r, row in enumerate(raw_nv):
            if not (isinstance(row, Sequence) and len(row) == len(indices)
                    and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row)):
                raise ParseError("hardware profile 'nvlink' row", _show(row),
                                 hint=f"each row holds {len(indices)} non-negative link counts")
            for c, count in enumerate(row):
                if r == c:
                    continue
                key = frozenset((order[r], order[c]))
                if key in nv and nv[key] != count:
                    raise ParseError("hardware profile 'nvlink'", _show(raw_nv),
                                     hint=f"the matrix is not symmetric at GPUs {order[r]} and {order[c]}")
                nv[key] = count
    pcie: dict[frozenset[int], str] = {}
    raw_pcie = data.get("pcie", {})
    if isinstance(raw_pcie, Mapping):
        for k, v in raw_pcie.items():
            i, j = _pair(k, "hardware profile PCIe pair")
            if not isinstance(v, str):
                raise ParseError("hardware profile PCIe link", _show(v), hint="a link token such as 'PIX' or 'SYS'")
            pcie[frozenset((i, j))] = v

    links: list[Link] = []
    for x, gx in enumerate(gpus):
        for gy in gpus[x + 1 :]:
            key = frozenset((gx.index, gy.index))
            if nv.get(key, 0) > 0:
                links.append(Link(gx.name, gy.name, LinkKind.NVLINK, nv[key], f"NV{nv[key]}"))
            elif key in pcie:
                links.append(Link.from_token(gx.name, gy.name, pcie[key]))
            else:
                same = gx.numa_label == gy.numa_label
                links.append(Link(gx.name, gy.name, LinkKind.NODE if same else LinkKind.SYS, 0,
                                  "NODE" if same else "SYS"))
    nics: list[Nic] = []
    raw_nics = data.get("nics", [])
    if isinstance(raw_nics, Sequence) and not isinstance(raw_nics, str):
        if len(raw_nics) > _MAX_DEVICES:
            raise ParseError("hardware profile 'nics'", _show(raw_nics), hint=f"at most {_MAX_DEVICES} NICs")
        for n in raw_nics:
            if not isinstance(n, Mapping) or not isinstance(n.get("name"), str):
                raise ParseError("hardware profile NIC", _show(n), hint="each NIC is {'name': 'mlx5_0', 'near': [0]}")
            nic = Nic(n["name"], n["name"])
            nics.append(nic)
            near = n.get("near", [])
            for g in gpus:
                kind = "PIX" if isinstance(near, Sequence) and g.index in near else "SYS"
                links.append(Link.from_token(g.name, nic.name, kind))
    topo = Topology(gpus=tuple(gpus), nics=tuple(nics), links=tuple(links),
                    notes=("built from a hardware profile",))
    return topo.with_model(model if isinstance(model, str) else None)
