"""A node's topology read from plain hardware-profile data (the sandbox profile JSON schema): its GPUs, NVLink
counts, PCIe relations and NICs, checked as they are read. :meth:`slurmlab.core.gpu.topology.Topology.from_profile`
builds the topology from what :func:`read_profile` returns."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.gpu.devices import Gpu, Nic, parse_cpu_list
from slurmlab.core.gpu.links import Link, LinkKind
from slurmlab.core.gpu.quoting import quoted
from slurmlab.errors import ParseError

__all__ = ["ProfileTopology", "read_profile"]

# no node holds more GPUs or NICs than this; a profile that says so would build n^2 links
_MAX_DEVICES = 256


@dataclass(frozen=True)
class ProfileTopology:
    """The parts of a topology a hardware profile declares; ``model`` None where it names none."""

    gpus: tuple[Gpu, ...]
    nics: tuple[Nic, ...]
    links: tuple[Link, ...]
    model: str | None


def read_profile(data: Mapping[str, object]) -> ProfileTopology:
    """The GPUs, NICs and links of a hardware profile (see ``Topology.from_profile`` for the keys used)."""
    if not isinstance(data, Mapping):
        raise ParseError("hardware profile", quoted(data), hint="expected a mapping (JSON object)")
    raw_gpus = data.get("gpus")
    model = data.get("gpu_model") or data.get("model")
    if not model and isinstance(raw_gpus, Sequence) and raw_gpus and isinstance(raw_gpus[0], Mapping):
        model = raw_gpus[0].get("name") or raw_gpus[0].get("model")
    gpus = _gpus(raw_gpus, model if isinstance(model, str) else None)
    nv = _nvlinks(data.get("nvlink", data.get("nvlinks", {})), [g.index for g in gpus])
    pcie = _pcie(data.get("pcie", {}))
    links = _gpu_links(gpus, nv, pcie)
    nics, nic_links = _nics(data.get("nics", []), gpus)
    return ProfileTopology(
        tuple(gpus), tuple(nics), tuple(links + nic_links), model if isinstance(model, str) else None
    )


def _as_set(value: object, what: str) -> frozenset[int] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ParseError(what, quoted(value), hint="give a list of ints or a string like 0-15,32-47")
    if isinstance(value, int):
        return frozenset((value,))
    if isinstance(value, str):
        return parse_cpu_list(value, what=what)
    if isinstance(value, Sequence):
        out: set[int] = set()
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ParseError(what, quoted(value), hint="give a list of ints or a string like 0-15,32-47")
            out.add(v)
        return frozenset(out)
    raise ParseError(what, quoted(value), hint="give a list of ints or a string like 0-15,32-47")


def _pair(key: object, what: str) -> tuple[int, int]:
    if isinstance(key, str):
        m = re.match(r"^\s*(?:GPU)?(\d+)\s*[-,:]\s*(?:GPU)?(\d+)\s*$", key)
        if m:
            return int(m.group(1)), int(m.group(2))
    elif isinstance(key, Sequence) and len(key) == 2 and all(isinstance(v, int) for v in key):
        return int(key[0]), int(key[1])
    raise ParseError(what, quoted(key), hint="name a GPU pair as '0-1' or [0, 1]")


def _gpus(raw_gpus: object, model: str | None) -> list[Gpu]:
    """The ``gpus`` list (or a count of GPUs), each index once."""
    if isinstance(raw_gpus, int) and not isinstance(raw_gpus, bool) and 0 < raw_gpus <= _MAX_DEVICES:
        raw_gpus = [{"index": i} for i in range(raw_gpus)]
    if (
        not isinstance(raw_gpus, Sequence)
        or isinstance(raw_gpus, str)
        or not raw_gpus
        or len(raw_gpus) > _MAX_DEVICES
    ):
        raise ParseError(
            "hardware profile 'gpus'",
            quoted(raw_gpus),
            hint=f"give a list of GPU objects or a count (1 to {_MAX_DEVICES})",
        )
    gpus: list[Gpu] = []
    for pos, g in enumerate(raw_gpus):
        if not isinstance(g, Mapping):
            raise ParseError(
                "hardware profile GPU", quoted(g), hint="each GPU is an object like {'index': 0}"
            )
        idx = g.get("index", pos)
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise ParseError("hardware profile GPU index", quoted(idx), hint="index must be an int")
        cpus = g.get("cpus", g.get("cpu_affinity", g.get("cores")))
        numa = g.get("numa", g.get("numa_affinity", g.get("socket")))
        gpus.append(
            Gpu(
                index=idx,
                name=f"GPU{idx}",
                cpu_affinity=_as_set(cpus, f"CPU affinity of GPU{idx}"),
                numa_affinity=_as_set(numa, f"NUMA affinity of GPU{idx}"),
                gpu_numa_id=g.get("gpu_numa_id") if isinstance(g.get("gpu_numa_id"), int) else None,
                model=model,
                uuid=g.get("uuid") if isinstance(g.get("uuid"), str) else None,
            )
        )
    indices = [g.index for g in gpus]
    if len(set(indices)) != len(indices):
        raise ParseError(
            "hardware profile GPU indices", quoted(indices), hint="each GPU index must be unique"
        )
    return gpus


def _nvlinks(raw_nv: object, indices: list[int]) -> dict[frozenset[int], int]:
    """NVLink counts per GPU pair, from ``all:<n>``, a mapping of pairs or an N x N matrix."""
    nv: dict[frozenset[int], int] = {}
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
                raise ParseError("hardware profile NVLink count", quoted(v), hint="a count of links (int)")
            nv[frozenset((i, j))] = v
    elif isinstance(raw_nv, Sequence):
        nv = _nvlink_matrix(raw_nv, indices)
    return nv


def _nvlink_matrix(raw_nv: Sequence[object], order: list[int]) -> dict[frozenset[int], int]:
    if len(raw_nv) != len(order):
        raise ParseError(
            "hardware profile 'nvlink'",
            quoted(raw_nv),
            hint=f"give an {len(order)} x {len(order)} matrix of link counts",
        )
    nv: dict[frozenset[int], int] = {}
    for r, row in enumerate(raw_nv):
        if not (
            isinstance(row, Sequence)
            and len(row) == len(order)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in row)
        ):
            raise ParseError(
                "hardware profile 'nvlink' row",
                quoted(row),
                hint=f"each row holds {len(order)} non-negative link counts",
            )
        for c, count in enumerate(row):
            if r == c:
                continue
            key = frozenset((order[r], order[c]))
            if key in nv and nv[key] != count:
                raise ParseError(
                    "hardware profile 'nvlink'",
                    quoted(raw_nv),
                    hint=f"the matrix is not symmetric at GPUs {order[r]} and {order[c]}",
                )
            nv[key] = count
    return nv


def _pcie(raw_pcie: object) -> dict[frozenset[int], str]:
    """The non-NVLink relations the profile names, as ``topo -m`` tokens per GPU pair."""
    pcie: dict[frozenset[int], str] = {}
    if isinstance(raw_pcie, Mapping):
        for k, v in raw_pcie.items():
            i, j = _pair(k, "hardware profile PCIe pair")
            if not isinstance(v, str):
                raise ParseError(
                    "hardware profile PCIe link", quoted(v), hint="a link token such as 'PIX' or 'SYS'"
                )
            pcie[frozenset((i, j))] = v
    return pcie


def _gpu_links(gpus: list[Gpu], nv: dict[frozenset[int], int], pcie: dict[frozenset[int], str]) -> list[Link]:
    """A link per GPU pair: NVLink, else the ``pcie`` entry, else NODE within one NUMA node and SYS across."""
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
                links.append(
                    Link(
                        gx.name,
                        gy.name,
                        LinkKind.NODE if same else LinkKind.SYS,
                        0,
                        "NODE" if same else "SYS",
                    )
                )
    return links


def _nics(raw_nics: object, gpus: list[Gpu]) -> tuple[list[Nic], list[Link]]:
    """The NICs and their link to every GPU: PIX to the GPUs ``near`` them, SYS to the others."""
    nics: list[Nic] = []
    links: list[Link] = []
    if isinstance(raw_nics, Sequence) and not isinstance(raw_nics, str):
        if len(raw_nics) > _MAX_DEVICES:
            raise ParseError("hardware profile 'nics'", quoted(raw_nics), hint=f"at most {_MAX_DEVICES} NICs")
        for n in raw_nics:
            if not isinstance(n, Mapping) or not isinstance(n.get("name"), str):
                raise ParseError(
                    "hardware profile NIC", quoted(n), hint="each NIC is {'name': 'mlx5_0', 'near': [0]}"
                )
            nic = Nic(n["name"], n["name"])
            nics.append(nic)
            near = n.get("near", [])
            for g in gpus:
                kind = "PIX" if isinstance(near, Sequence) and g.index in near else "SYS"
                links.append(Link.from_token(g.name, nic.name, kind))
    return nics, links
