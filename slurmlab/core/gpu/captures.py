"""Text that describes a node's GPUs, read into models: saved ``nvidia-smi`` output, a hardware-profile JSON, and
the one-line JSON reports the probe steps print.

Everything here takes text (or parsed JSON), never a path: reading the file is the caller's I/O.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from slurmlab.core.gpu.mig import ComputeInstance, MigLayout
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.core.gpu.smi_parse import (
    MigProfileRow,
    SmiDevice,
    parse_mig_cgi_log,
    parse_mig_lci,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_mig_lgipp,
    parse_smi_list,
    parse_topo_matrix,
    sniff,
)
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError

__all__ = [
    "MIG_KINDS",
    "NVML_REPORT_PREFIX",
    "MigCapture",
    "read_mig_capture",
    "mig_from_text",
    "probe_report",
    "topology_from_nvml_report",
    "topology_from_text",
    "visible_gpus",
]

# the line the NVML probe step prints its JSON report after
NVML_REPORT_PREFIX = "SLURMLAB_NVML "


def _json_or_none(text: str) -> dict[str, object] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("hardware profile JSON", text[:200], hint=f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):  # cannot happen: JSON text that opens with { is an object
        raise ParseError("hardware profile JSON", text[:200], hint="expected a JSON object")
    return doc


def topology_from_text(text: str, where: str, *, model: str | None = None) -> NodeTopology:
    """A topology from saved ``nvidia-smi topo -m`` output or hardware-profile JSON; ``where`` names the file."""
    data = _json_or_none(text)
    if data is not None:
        topo = Topology.from_profile(data)
        return NodeTopology(topo.with_model(model) if model else topo, "file", f"hardware profile in {where}")
    kind = sniff(text)
    if kind != "topo":
        raise ParseError("nvidia-smi topo -m output", text[:120],
                         hint=f"{where} looks like `{kind}` output; save `nvidia-smi topo -m` instead"
                         + ("; `slurmlab mig` reads MIG listings (in Python: mig_from_file())"
                            if kind in MIG_KINDS else ""))
    return NodeTopology(parse_topo_matrix(text, gpu_model=model), "file", f"nvidia-smi topo -m saved in {where}")


# the MIG outputs a capture may hold, and which of them describe a layout (the others are catalogues)
MIG_KINDS = ("lgi", "list", "cgi", "lgip", "lgipp", "lci")
_LAYOUT_KINDS = ("lgi", "list", "cgi")


@dataclasses.dataclass(frozen=True)
class MigCapture:
    """What one saved MIG output says: a layout (``-lgi``, ``-L``, a ``-cgi`` log) or a catalogue (``-lgip``
    profiles with free/total counts, ``-lgipp`` placements, ``-lci`` compute instances)."""

    kind: str
    layout: MigLayout | None = None
    devices: tuple[SmiDevice, ...] = ()
    profiles: tuple[MigProfileRow, ...] = ()
    placements: Mapping[int, Mapping[int, tuple[tuple[int, ...], int]]] = dataclasses.field(default_factory=dict)
    compute_instances: tuple[tuple[int, int, ComputeInstance, tuple[int, int] | None], ...] = ()

    def lines(self) -> list[str]:
        """The capture as readable lines (the layout's own summary is separate: ``layout.summary()``)."""
        # a MIG device by its slice's one name (mig_slice_label), then -L's own "Device N" and profile
        slice_of = {u: inst.label for inst in (self.layout.instances() if self.layout else [])
                    for u in (inst.uuid, *(ci.uuid for ci in inst.compute_instances)) if u}
        out = [f"{d.name} {d.index}: {d.uuid}" if d.parent is None or d.uuid not in slice_of
               else f"    {slice_of[d.uuid]} — -L device {d.index} ({d.name}): {d.uuid}" for d in self.devices]
        if self.kind == "list" and self.layout is None:
            out.append("no MIG devices in this listing")
        out += [f"GPU {r.gpu}  {r.name:<14} id {r.profile_id:>2}  {r.free}/{r.total} free  "
                f"{r.memory_gib:g} GiB  {r.sm} SMs" for r in self.profiles]
        for gpu, profiles in self.placements.items():
            out += [f"GPU {gpu}  profile id {pid:>2}  placements {', '.join(f'{s}:{size}' for s in starts)}"
                    for pid, (starts, size) in profiles.items()]
        for gpu, gi, ci, place in self.compute_instances:
            where = f" placement {place[0]}:{place[1]}" if place else ""
            out.append(f"GPU {gpu}  GI {gi}  CI {ci.ci_id}  {ci.name}{where}")
        return out


def read_mig_capture(text: str, where: str, *, model: str | None = None) -> MigCapture:
    """Any saved MIG output of ``nvidia-smi`` (see :data:`MIG_KINDS`), recognised by its structure."""
    kind = sniff(text)
    if kind == "lgi":
        return MigCapture(kind, layout=parse_mig_lgi(text, gpu_model=model))
    if kind == "list":
        devices, layout = parse_smi_list(text)
        return MigCapture(kind, layout=layout, devices=tuple(devices))
    if kind == "cgi":
        return MigCapture(kind, layout=parse_mig_cgi_log(text, gpu_model=model))
    if kind == "lgip":
        return MigCapture(kind, profiles=tuple(parse_mig_lgip(text)))
    if kind == "lgipp":
        return MigCapture(kind, placements=parse_mig_lgipp(text))
    if kind == "lci":
        return MigCapture(kind, compute_instances=tuple(parse_mig_lci(text)))
    raise ParseError("MIG output", text[:120],
                     hint=f"{where} looks like `{kind}` output; expected one of `nvidia-smi mig -lgi`, "
                     "`nvidia-smi -L`, a `mig -cgi -C` log, `mig -lgip`, `mig -lgipp` or `mig -lci`"
                     + ("; `slurmlab topo` reads topology" if kind.startswith("topo") else ""))


def mig_from_text(text: str, where: str, *, model: str | None = None) -> NodeMig:
    """A MIG layout from saved ``nvidia-smi mig -lgi`` / ``nvidia-smi -L`` output, a ``-cgi`` log or profile JSON."""
    data = _json_or_none(text)
    if data is not None:
        return NodeMig(MigLayout.from_profile(data), "file", f"hardware profile in {where}")
    capture = read_mig_capture(text, where, model=model)
    if capture.layout is not None:
        return NodeMig(capture.layout, "file", f"saved in {where}")
    if capture.kind == "list":
        raise RequestError(f"{where}: `nvidia-smi -L` lists no MIG devices (MIG mode is off on these GPUs)")
    raise RequestError(f"{where}: `nvidia-smi mig -{capture.kind}` is a catalogue, not a layout",
                       hint="read it with read_mig_capture(); for a layout save `nvidia-smi mig -lgi` or "
                       "`nvidia-smi -L`")


def probe_report(lines: Sequence[str], prefix: str) -> dict[str, object] | None:
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


def topology_from_nvml_report(report: Mapping[str, object]) -> Topology:
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
    gpu_data = [{"index": g.get("index"), "name": g.get("name"), "uuid": g.get("uuid"),
                 "cpus": g.get("cpus") or None} for g in gpus if isinstance(g, Mapping)]
    data = {"gpus": gpu_data, "nvlink": nvlink, "pcie": report.get("pcie", {})}
    if len(gpu_data) != len(gpus):
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
