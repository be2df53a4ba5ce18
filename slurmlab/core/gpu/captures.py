"""Text that describes a node's GPUs, read into models: saved ``nvidia-smi`` output, a hardware-profile JSON, and
the one-line JSON reports the probe steps print.

Everything here takes text (or parsed JSON), never a path: reading the file is the caller's I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.core.gpu.smi_parse import parse_mig_lgi, parse_smi_list, parse_topo_matrix, sniff
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError

__all__ = [
    "NVML_REPORT_PREFIX",
    "mig_from_text",
    "probe_report",
    "topology_from_nvml_report",
    "topology_from_text",
    "visible_gpus",
]

# the line the NVML probe step prints its JSON report after
NVML_REPORT_PREFIX = "SLURMLAB_NVML "


def _json_or_none(text: str) -> Any:
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("hardware profile JSON", text[:200], hint=f"not valid JSON: {exc}") from None


def topology_from_text(text: str, where: str, *, model: str | None = None) -> NodeTopology:
    """A topology from saved ``nvidia-smi topo -m`` output or hardware-profile JSON; ``where`` names the file."""
    data = _json_or_none(text)
    if data is not None:
        topo = Topology.from_profile(data)
        return NodeTopology(topo.with_model(model) if model else topo, "file", f"hardware profile in {where}")
    kind = sniff(text)
    if kind != "topo":
        raise ParseError("nvidia-smi topo -m output", text[:120],
                         hint=f"{where} looks like `{kind}` output; save `nvidia-smi topo -m` instead")
    return NodeTopology(parse_topo_matrix(text, gpu_model=model), "file", f"nvidia-smi topo -m saved in {where}")


def mig_from_text(text: str, where: str, *, model: str | None = None) -> NodeMig:
    """A MIG layout from saved ``nvidia-smi mig -lgi`` / ``nvidia-smi -L`` output or hardware-profile JSON."""
    data = _json_or_none(text)
    if data is not None:
        return NodeMig(MigLayout.from_profile(data), "file", f"hardware profile in {where}")
    return NodeMig(_parse_mig_text(text, model, where), "file", f"saved in {where}")


def _parse_mig_text(text: str, model: str | None, where: str) -> MigLayout:
    kind = sniff(text)
    if kind == "lgi":
        return parse_mig_lgi(text, gpu_model=model)
    if kind == "list":
        _devices, layout = parse_smi_list(text)
        if layout is None:
            raise RequestError(f"{where}: `nvidia-smi -L` lists no MIG devices (MIG mode is off on these GPUs)")
        return layout
    raise ParseError("MIG listing", text[:120],
                     hint=f"{where} looks like `{kind}` output; expected `nvidia-smi mig -lgi` or `nvidia-smi -L`")


def probe_report(lines: Sequence[str], prefix: str) -> dict[str, Any] | None:
    """The JSON object a probe step printed after ``prefix`` (None when no line carries it)."""
    for line in lines:
        if line.startswith(prefix):
            try:
                data = json.loads(line[len(prefix):])
            except json.JSONDecodeError:
                raise ParseError("probe report", line[:300], hint="the step printed a broken JSON line") from None
            if not isinstance(data, dict):
                raise ParseError("probe report", line[:300], hint="expected a JSON object")
            return data
    return None


def topology_from_nvml_report(report: Mapping[str, Any]) -> Topology:
    """Build a topology from the NVML probe's JSON: GPUs with CPU affinity, NVLink ends per pair, PCIe ancestry.

    Each active NVLink is seen from both ends, so a pair's count is half the ends the report lists.
    """
    gpus = report.get("gpus")
    if not isinstance(gpus, list) or not gpus:
        raise ParseError("NVML report", json.dumps(dict(report))[:300], hint="it lists no GPUs")
    ends = report.get("nvlink_ends", {})
    if not isinstance(ends, Mapping):
        raise ParseError("NVML report 'nvlink_ends'", repr(ends)[:200], hint="a mapping 'i-j' -> count")
    nvlink: dict[str, int] = {}
    for key, count in ends.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ParseError("NVML report NVLink count", repr(count), hint="a count of link ends (int)")
        nvlink[str(key)] = (count + 1) // 2
    data = {"gpus": [{"index": g.get("index"), "name": g.get("name"), "uuid": g.get("uuid"),
                      "cpus": g.get("cpus") or None} for g in gpus if isinstance(g, Mapping)],
            "nvlink": nvlink, "pcie": report.get("pcie", {})}
    if len(data["gpus"]) != len(gpus):
        raise ParseError("NVML report GPU", repr(gpus)[:300], hint="each GPU is an object")
    topo = Topology.from_profile(data)
    return dataclasses.replace(topo, notes=("from NVML",))


def visible_gpus(topo: Topology, idx: tuple[int, ...]) -> tuple[tuple[int, ...], list[str]]:
    """Which GPUs of a live capture are the allocation's (Slurm IDX ``idx``), and a note when the step saw only
    those."""
    shown = tuple(g.index for g in topo.gpus)
    if idx and len(shown) == len(idx) and set(shown) != set(idx):
        # a device cgroup (ConstrainDevices=yes) shows the step only its GPUs, renumbered from 0
        return shown, [f"the step sees only this allocation's GPUs, numbered 0-{len(shown) - 1}; "
                       f"Slurm calls them IDX {', '.join(map(str, idx))}"]
    return tuple(i for i in idx if i in shown), []
