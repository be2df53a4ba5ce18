"""What kind of NVLink fabric a node has — switched (NVSwitch), direct NVLink, or PCIe only — and the bandwidth
it gives per GPU and per GPU pair.

``nvidia-smi topo -m`` prints ``NV18`` for every pair of an HGX H100 box: each GPU's 18 links go to the NVSwitch
chips, not to a peer. Read as pair cables, that would be 7 x 18 = 126 links on a GPU that has 18, and bandwidth
summed over pairs that no hardware has. A switch gives any pair the GPU's full link count, and a GPU never more.
So a fabric is switched when the NV# a GPU shows to its peers adds up to more links than one GPU has, or when a
pair of SXM GPUs shows every link of the model (no direct board does that), or when the node names a DGX/HGX
baseboard of 8+ GPUs. Direct meshes (DGX-1 V100 hybrid cube mesh, POWER9 NVLink pairs, NVLink bridges,
4x GH200) stay pairwise.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slurmlab.core.gpu.nvlink.models import (
    NVLINK_GENERATIONS,
    NvlinkGeneration,
    NvlinkModel,
    nvlink_model_for,
)

if TYPE_CHECKING:
    from slurmlab.core.gpu.topology import Topology

__all__ = ["FabricKind", "NvlinkFabric", "nvlink_fabric"]

# no GPU has more NVLinks than this (H100/H200/B200: 18); more on one GPU means the links go to a switch
MOST_LINKS_OF_ANY_GPU = 18
# a DGX/HGX baseboard of this many GPUs joins them through NVSwitch (DGX-1 and DGX Station are meshes)
_SWITCHED_SYSTEM = re.compile(r"\b(DGX|HGX)\b(?!\s*-?\s*1\b)(?!.*STATION)")


class FabricKind(enum.Enum):
    SWITCHED = "switched (NVSwitch)"
    DIRECT = "direct NVLink"
    PCIE = "PCIe only"


@dataclass(frozen=True)
class NvlinkFabric:
    """A node's NVLink fabric: its kind, why, and the figures to state bandwidth with."""

    kind: FabricKind
    reason: str
    pair_links: Mapping[frozenset[int], int]  # NV# per GPU pair that has NVLink (topology indices)
    links_per_gpu: int | None  # links one GPU has (the model's, else read off the matrix); None for PCIe only
    per_link_gbps: float | None  # spec, per link and direction; None when the generation is unknown
    model: NvlinkModel | None = None
    generation: NvlinkGeneration | None = None
    active_links: Mapping[int, int] = field(default_factory=dict)  # from nvlink -s, where read
    gpus: tuple[int, ...] = ()  # every GPU of the node (those without NVLink too)
    faults: Mapping[int, str] = field(default_factory=dict)  # GPU -> "2 of 18 links inactive", from nvlink -s

    @property
    def switched(self) -> bool:
        return self.kind is FabricKind.SWITCHED

    def nvlink_gpus(self) -> tuple[int, ...]:
        return tuple(sorted({g for pair in self.pair_links for g in pair}))

    def gpu_links(self, gpu: int) -> int:
        """The links GPU ``gpu`` brings: into the switch (all it has, less inactive ones) or to its peers."""
        if self.switched:
            full = self.links_per_gpu or max((n for p, n in self.pair_links.items() if gpu in p), default=0)
            return min(full, self.active_links.get(gpu, full))
        return sum(n for p, n in self.pair_links.items() if gpu in p)

    def pair_link_count(self, a: int, b: int) -> int:
        """Links usable between GPUs ``a`` and ``b``: on a switch the lesser of the two GPUs' links."""
        n = self.pair_links.get(frozenset((a, b)), 0)
        if self.switched and n:
            return min(self.gpu_links(a), self.gpu_links(b))
        return n

    def gpu_gbps(self, gpu: int, *, bidirectional: bool = False) -> float | None:
        """A GPU's NVLink bandwidth in all (per direction unless ``bidirectional``); None when unknown or none."""
        return self._gbps(self.gpu_links(gpu), bidirectional)

    def pair_gbps(self, a: int, b: int, *, bidirectional: bool = False) -> float | None:
        """NVLink bandwidth between two GPUs; on a switch the GPU's full figure, not a share of a sum."""
        return self._gbps(self.pair_link_count(a, b), bidirectional)

    def _gbps(self, links: int, bidirectional: bool) -> float | None:
        if not links or self.per_link_gbps is None:
            return None
        return links * self.per_link_gbps * (2 if bidirectional else 1)

    def _bw(self, links: int) -> str:
        one = self._gbps(links, False)
        if one is None:
            return f"{_plural(links, 'link')} (speed unknown: give the GPU model)"
        return f"{_plural(links, 'link')} x {self.per_link_gbps:g} GB/s = {one:g} GB/s per direction ({2 * one:g} GB/s both ways)"

    def lines(self) -> list[str]:
        """The summary lines: the kind and why, then bandwidth per GPU and per pair."""
        out = [f"NVLink fabric: {self.kind.value} — {self.reason}"]
        if self.kind is FabricKind.PCIE:
            return out
        if self.model is None and self.generation is not None:
            out.append(
                f"  the capture does not name the GPU model: figures assume {self.generation.name} "
                f"({', '.join(self.generation.gpus)}); give the model to be sure"
            )
        gpus = self.nvlink_gpus()
        if self.switched:
            full = self.links_per_gpu or max(self.pair_links.values())
            out.append(f"  per GPU: {self._bw(full)} into the switch, whatever the number of peers")
            out.append(
                f"  per pair: any two GPUs get a GPU's full {self._bw(full).split(' = ')[-1]}"
                if self.per_link_gbps
                else "  per pair: any two GPUs get a GPU's full link count"
            )
            for g in gpus:
                if self.gpu_links(g) < full:
                    why = self.faults.get(g, "links inactive")
                    out.append(
                        f"  GPU{g}: only {self._bw(self.gpu_links(g))} ({why}): every pair "
                        f"with GPU{g} is held to that"
                    )
            return out
        per_pair = sorted(set(self.pair_links.values()), reverse=True)
        n = len(self.gpus)
        pcie = "; pairs without NVLink go over PCIe" if len(self.pair_links) < n * (n - 1) // 2 else ""
        out.append("  per pair: " + "; ".join(f"NV{n} = {self._bw(n)}" for n in per_pair) + pcie)
        totals: dict[int, list[int]] = {}
        for g in gpus:
            totals.setdefault(self.gpu_links(g), []).append(g)
        for links, members in sorted(totals.items(), reverse=True):
            of = f" of its {self.links_per_gpu}" if self.links_per_gpu else ""
            out.append(
                f"  per GPU: GPU {', '.join(map(str, members))}: {links}{of} links to peers — "
                f"{self._bw(links).split(' = ')[-1]}"
            )
        return out


def _article(word: str) -> str:
    return "an" if word[0] in "AEHR" else "a"  # an A100, an H100, an RTX 3090; a V100, a B200


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def nvlink_fabric(topo: Topology) -> NvlinkFabric:
    """Classify ``topo``'s GPU interconnect and gather the figures its bandwidth is stated with."""
    pair_links: dict[frozenset[int], int] = {}
    for lk in topo.nvlink_edges():
        pair_links[frozenset((int(lk.a[3:]), int(lk.b[3:])))] = lk.nvlinks
    model = nvlink_model_for(topo.gpu_model)
    gen = topo.nvlink_generation
    indices = tuple(g.index for g in topo.gpus)
    active = {s.gpu: s.active for s in topo.link_states}
    faults = {s.gpu: label for s in topo.link_states if (label := s.fault_label())}
    if not pair_links:
        kinds = sorted({lk.kind for lk in topo.gpu_links()}, key=lambda k: k.rank)
        via = ", ".join(k.value for k in kinds) or "no GPU pairs"
        why = f"no GPU pair shows NV# in the matrix; GPUs reach each other over PCIe ({via})"
        if len(topo.gpus) < 2:
            why = "a single GPU: no peers to link"
        return NvlinkFabric(FabricKind.PCIE, why, {}, None, None, model, gen, gpus=indices)

    per_gpu = {g.index: topo.nvlinks_per_gpu(g.index) for g in topo.gpus}
    busiest = max(per_gpu, key=lambda g: per_gpu[g])
    peers = [p for p in pair_links if busiest in p]
    shown = sorted({pair_links[p] for p in peers})
    capacity = model.links_per_gpu if model else MOST_LINKS_OF_ANY_GPU
    owner = f"{_article(model.key)} {model.key}" if model else "no GPU"
    per_link = model.per_direction_gbps if model else (gen.per_direction_gbps if gen else None)
    links_per_gpu = model.links_per_gpu if model else (gen.links_per_gpu if gen else None)
    widest = max(pair_links.values())

    def switched(reason: str) -> NvlinkFabric:
        links = model.links_per_gpu if model else widest
        switch_gen = gen or _generation_of_switched(widest)
        speed = per_link if per_link is not None else (switch_gen.per_direction_gbps if switch_gen else None)
        return NvlinkFabric(
            FabricKind.SWITCHED, reason, pair_links, links, speed, model, switch_gen, active, indices, faults
        )

    if per_gpu[busiest] > capacity:
        nv = "/".join(f"NV{n}" for n in shown)
        has = f"{owner} has {capacity}" if model else f"no GPU has more than {capacity}"
        return switched(
            f"GPU{busiest} shows {nv} to each of its {_plural(len(peers), 'peer')}, "
            f"{per_gpu[busiest]} links in all, but {has}: its links go to NVSwitch chips, "
            "and every peer is reached through them"
        )
    if model and model.full_pair_means_switch and widest >= model.links_per_gpu:
        return switched(
            f"a pair of {model.key} showing all {model.links_per_gpu} links (NV{widest}) can only be "
            f"an NVSwitch fabric: no direct {model.key} board joins two GPUs with every link"
        )
    if topo.gpu_model and _SWITCHED_SYSTEM.search(topo.gpu_model.upper()) and len(topo.gpus) >= 8:
        return switched(f"{topo.gpu_model} joins its {len(topo.gpus)} GPUs through NVSwitch")
    nv = " or ".join(f"NV{n}" for n in sorted(set(pair_links.values()), reverse=True))
    bridge = (
        " (an NVLink bridge)" if len(topo.gpus) == 2 and model and not model.full_pair_means_switch else ""
    )
    limit = f"its {capacity}" if model else f"any GPU has ({capacity} at most)"
    return NvlinkFabric(
        FabricKind.DIRECT,
        f"GPU pairs are cabled to each other{bridge}: {nv}; no GPU shows more links than {limit} "
        f"(most: GPU{busiest} with {per_gpu[busiest]})",
        pair_links,
        links_per_gpu,
        per_link,
        model,
        gen,
        active,
        indices,
        faults,
    )


def _generation_of_switched(links: int) -> NvlinkGeneration | None:
    """The generation of an unnamed switched GPU, by the links each GPU brings to the switch."""
    # V100 (DGX-2): 6; A100: 12; H100/H200: 18 (B200 has 18 too: NVLink 5 only when the model says so)
    return {
        6: NVLINK_GENERATIONS["nvlink2"],
        12: NVLINK_GENERATIONS["nvlink3"],
        18: NVLINK_GENERATIONS["nvlink4"],
    }.get(links)
