"""Hardware-profile data read into models, and the hardware file a slurmlab sandbox writes beside its slurm.conf.

A hardware profile is plain data in the sandbox's profile schema (``gpus``, ``nvlink``, ``mig``, ``cpu`` …; see
:mod:`slurmlab.sandbox.profile`). A sandbox's GPUs are stand-in device files, so its profile is the truth about
its nodes: when it starts, the sandbox writes :data:`HARDWARE_FILE` next to ``slurm.conf`` with the profile and
which GPU (or MIG slice) each Slurm GRES index of a node stands for. Whoever holds a ``SLURM_CONF`` reads that
file to learn the hardware; nothing imports the sandbox for it.

    {"format": 1, "profile": {…profile data…}, "nodes": ["node1", "node2"],
     "gres_idx": [{"gpu": 4, "mig": null}, …, {"gpu": 1, "mig": 9}]}   # per Slurm IDX of a node

``mig`` is the position of the slice in the profile's ``mig`` list. Everything here takes text or data, no paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.gpu.mig import MigLayout, mig_slice_label
from slurmlab.core.gpu.node_models import MigHighlight, NodeMig, NodeTopology
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError

__all__ = [
    "HARDWARE_FILE",
    "SandboxHardware",
    "parse_hardware",
    "profile_mig",
    "profile_topology",
    "render_hardware",
    "whole_gpu_type",
]

HARDWARE_FILE = "slurmlab-hardware.json"
_FORMAT = 1


def _objects(profile: Mapping[str, object], key: str) -> list[Mapping[str, object]]:
    """The objects listed under ``key``; entries that are not objects are skipped (the readers refuse them)."""
    raw = profile.get(key, [])
    return [m for m in raw if isinstance(m, Mapping)] if isinstance(raw, Iterable) else []


def whole_gpu_type(profile: Mapping[str, object]) -> str | None:
    """Slurm's GRES type of the profile's whole GPUs (``h100``), when they share one."""
    split = {m.get("gpu") for m in _objects(profile, "mig")}
    types = {g.get("model") for g in _objects(profile, "gpus") if g.get("index") not in split}
    found = types.pop() if len(types) == 1 else None
    return found if isinstance(found, str) else None


def _name(profile: Mapping[str, object]) -> str:
    name = profile.get("name")
    return name if isinstance(name, str) and name else "(unnamed)"


def profile_topology(profile: Mapping[str, object]) -> NodeTopology:
    """The topology of a hardware profile (the ``profile`` source)."""
    return NodeTopology(
        Topology.from_profile(profile),
        "profile",
        f"hardware profile {_name(profile)}",
        gpu_type=whole_gpu_type(profile),
    )


def profile_mig(profile: Mapping[str, object]) -> NodeMig:
    """The MIG layout of a hardware profile (RequestError when it has none)."""
    return NodeMig(MigLayout.from_profile(profile), "profile", f"hardware profile {_name(profile)}")


def _slice_label(gpu: int, entry: Mapping[str, object]) -> str:
    """A profile's MIG entry ``{gpu, profile, start, size}`` by the slice's one name."""
    start, size = entry.get("start"), entry.get("size")
    return mig_slice_label(
        gpu,
        str(entry.get("profile")),
        start if isinstance(start, int) else None,
        size if isinstance(size, int) else None,
    )


# ---- the sandbox's hardware file ------------------------------------------------------------------


def render_hardware(
    profile: Mapping[str, object], nodes: Sequence[str], gres_idx: Sequence[tuple[int, int | None]]
) -> str:
    """The text of :data:`HARDWARE_FILE`: the profile data, the node names, and per Slurm GRES index of a node
    the GPU it stands for with the MIG slice's position in ``profile["mig"]`` (None for a whole GPU)."""
    doc = {
        "format": _FORMAT,
        "profile": dict(profile),
        "nodes": list(nodes),
        "gres_idx": [{"gpu": gpu, "mig": pos} for gpu, pos in gres_idx],
    }
    return json.dumps(doc, indent=1) + "\n"


@dataclass(frozen=True)
class SandboxHardware:
    """What a sandbox's hardware file says: its profile, nodes and GRES index map."""

    profile: Mapping[str, object]
    nodes: tuple[str, ...]
    gres_idx: tuple[tuple[int, int | None], ...]  # per Slurm IDX: (GPU index, MIG position or None)
    directory: str  # the sandbox's folder (where slurm.conf and the file are)

    @property
    def name(self) -> str:
        return _name(self.profile)

    @property
    def detail(self) -> str:
        return f"hardware profile {self.name} of the sandbox in {self.directory}"

    def _mig(self) -> list[Mapping[str, object]]:
        return _objects(self.profile, "mig")

    def _check_node(self, node: str) -> None:
        if node not in self.nodes:
            raise RequestError(f"node {node!r} is not in the sandbox (its nodes: {', '.join(self.nodes)})")

    def node_topology(self, node: str, idx: Sequence[int] = (), *, tried: Sequence[str] = ()) -> NodeTopology:
        """The topology of ``node`` with the GPUs of Slurm IDX ``idx`` marked (a MIG slice as its parent GPU)."""
        self._check_node(node)
        mig = self._mig()
        # a MIG slice counts as its parent GPU here: its NUMA node and CPUs are the parent's
        mapping = {i: gpu for i, (gpu, _pos) in enumerate(self.gres_idx) if gpu != i}
        gpus = tuple(dict.fromkeys(mapping.get(i, i) for i in idx))
        slices = [
            f"Slurm IDX {i} is the MIG slice {_slice_label(gpu, mig[pos])}"
            for i in idx
            if i < len(self.gres_idx)
            for gpu, pos in [self.gres_idx[i]]
            if pos is not None and pos < len(mig)
        ]
        return NodeTopology(
            Topology.from_profile(self.profile),
            "sandbox",
            self.detail,
            node,
            gpus,
            tuple(idx),
            mapping,
            tuple(tried),
            tuple(slices),
            gpu_type=whole_gpu_type(self.profile),
        )

    def node_mig(self, node: str, idx: Sequence[int] = (), *, tried: Sequence[str] = ()) -> NodeMig:
        """The MIG layout of ``node`` with the slices of Slurm IDX ``idx`` highlighted."""
        self._check_node(node)
        mig = self._mig()
        if not mig:
            raise RequestError(
                f"the sandbox's profile {self.name} has no MIG instances",
                hint="start one with MIG: `slurmlab sandbox up --profile h200-mig`",
            )
        highlight: list[MigHighlight] = []
        for i in idx:
            pos = self.gres_idx[i][1] if i < len(self.gres_idx) else None
            if pos is not None and pos < len(mig):
                inst = mig[pos]
                gpu = inst.get("gpu")
                if isinstance(gpu, int):  # any other is refused by MigLayout.from_profile below
                    highlight.append((gpu, f"{inst.get('start')}:{inst.get('size')}"))
        return NodeMig(
            MigLayout.from_profile(self.profile), "sandbox", self.detail, node, tuple(highlight), tuple(tried)
        )


def parse_hardware(text: str, *, directory: str) -> SandboxHardware:
    """Read the text of :data:`HARDWARE_FILE` found in ``directory``."""
    where = f"{directory}/{HARDWARE_FILE}"
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("sandbox hardware file", where, hint=f"not valid JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise ParseError("sandbox hardware file", where, hint="expected a JSON object")
    if doc.get("format") != _FORMAT:
        raise ParseError(
            "sandbox hardware file format",
            repr(doc.get("format"))[:50],
            hint=f"{where} was written by another slurmlab; restart the sandbox with this one",
        )
    profile, nodes, raw_idx = doc.get("profile"), doc.get("nodes"), doc.get("gres_idx")
    if not isinstance(profile, Mapping):
        raise ParseError("sandbox hardware 'profile'", repr(profile)[:200], hint=f"an object in {where}")
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise ParseError(
            "sandbox hardware 'nodes'", repr(nodes)[:200], hint=f"a list of node names in {where}"
        )
    if not isinstance(raw_idx, list):
        raise ParseError("sandbox hardware 'gres_idx'", repr(raw_idx)[:200], hint=f"a list in {where}")
    gres_idx: list[tuple[int, int | None]] = []
    for item in raw_idx:
        gpu = item.get("gpu") if isinstance(item, Mapping) else None
        pos = item.get("mig") if isinstance(item, Mapping) else None
        if (
            not isinstance(gpu, int)
            or isinstance(gpu, bool)
            or not (pos is None or isinstance(pos, int) and not isinstance(pos, bool))
        ):
            raise ParseError(
                "sandbox hardware GRES index",
                repr(item)[:200],
                hint=f'{{"gpu": <index>, "mig": <position or null>}} in {where}',
            )
        gres_idx.append((gpu, pos))
    return SandboxHardware(profile, tuple(nodes), tuple(gres_idx), directory)
