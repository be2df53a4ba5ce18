"""Text that describes a node's GPUs, read into models: saved ``nvidia-smi`` output, a hardware-profile JSON, and
the one-line JSON reports the probe steps print.

Everything here takes text (or parsed JSON), never a path: reading the file is the caller's I/O. Users reach
these readers through ``slurmlab.topology()`` / ``slurmlab.mig()`` (saved files, profiles, text) and
``alloc.topology()`` / ``alloc.mig()`` (the probes' reports).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from slurmlab.core.gpu.mig import (
    MIG_PROFILE_TABLES,
    ComputeInstance,
    MigCatalogue,
    MigLayout,
    MigProfileTable,
    ProfileRoom,
    choose_table,
    layouts_with_room,
    parse_profile_name,
    room_left,
    room_sentence,
)
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.core.gpu.smi import (
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
        raise ParseError(
            "nvidia-smi topo -m output",
            text[:120],
            hint=f"{where} looks like `{kind}` output; save `nvidia-smi topo -m` instead"
            + ("; `slurmlab mig` reads MIG listings (in Python: slurmlab.mig())" if kind in MIG_KINDS else "")
            + (
                f"; it holds each NVLink's state: give it beside the topo -m capture, "
                f"slurmlab.topology('topo-m.txt', nvlink='{where}') or "
                f"`slurmlab topo topo-m.txt --nvlink {where}`"
                if kind == "nvlink-s"
                else ""
            ),
        )
    return NodeTopology(
        parse_topo_matrix(text, gpu_model=model), "file", f"nvidia-smi topo -m saved in {where}"
    )


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
    placements: Mapping[int, Mapping[int, tuple[tuple[int, ...], int]]] = dataclasses.field(
        default_factory=dict
    )
    compute_instances: tuple[tuple[int, int, ComputeInstance, tuple[int, int] | None], ...] = ()
    model: str | None = None  # the GPU model the user gave, for captures that do not name it

    def catalogue(self) -> MigCatalogue | None:
        """What can still be carved, per GPU and profile: ``-lgip``'s counts, memory and SMs as printed (with the
        profile table's placements), ``-lgipp``'s placements, or the room a layout leaves (derived from its
        geometry); None for ``-lci`` or a layout whose room is unknown."""
        if self.profiles:
            return _lgip_catalogue(self.profiles, self.model)
        if self.placements:
            return _lgipp_catalogue(self.placements, self.model)
        return self.layout.catalogue() if self.layout is not None else None

    def lines(self) -> list[str]:
        """The capture as readable lines (the layout's own summary is separate: ``layout.summary()``)."""
        # a MIG device by its slice's one name (mig_slice_label), then -L's own "Device N" and profile
        slice_of = {
            u: inst.label
            for inst in (self.layout.instances() if self.layout else [])
            for u in (inst.uuid, *(ci.uuid for ci in inst.compute_instances))
            if u
        }
        out = [
            f"{d.name} {d.index}: {d.uuid}"
            if d.parent is None or d.uuid not in slice_of
            else f"    {slice_of[d.uuid]} — -L device {d.index} ({d.name}): {d.uuid}"
            for d in self.devices
        ]
        if self.kind == "list" and self.layout is None:
            out.append("no MIG devices in this listing")
        out += [
            f"GPU {r.gpu}  {r.name:<14} id {r.profile_id:>2}  {r.free}/{r.total} free  "
            f"{r.memory_gib:g} GiB  {r.sm} SMs"
            for r in self.profiles
        ]
        cat = self.catalogue() if self.profiles else None
        if cat is not None:
            out += [f"GPU {gpu}: {room_sentence(cat.of(gpu))}" for gpu in cat.gpus]
        for gpu, profiles in self.placements.items():
            out += [
                f"GPU {gpu}  profile id {pid:>2}  placements {', '.join(f'{s}:{size}' for s in starts)}"
                for pid, (starts, size) in profiles.items()
            ]
        for gpu, gi, ci, place in self.compute_instances:
            where = f" placement {place[0]}:{place[1]}" if place else ""
            out.append(f"GPU {gpu}  GI {gi}  CI {ci.ci_id}  {ci.name}{where}")
        return out


def _lgip_catalogue(profiles: Sequence[MigProfileRow], model: str | None) -> MigCatalogue:
    """``-lgip`` as a catalogue: its counts, memory and SMs, with the placements of the profile table; which
    placements are free where the counts allow only layouts that agree on it."""
    choice = choose_table([r.name for r in profiles], model)
    table = choice.table
    own = {p.name: p for p in table.profiles} if table else {}
    free_starts: dict[tuple[int, str], tuple[int, ...]] = {}
    notes = []
    # GPUs of a node often print the same counts; the search over layouts is done once per set of counts
    starts_of: dict[tuple[tuple[str, int], ...], list[dict[str, tuple[int, ...] | None]]] = {}
    for gpu in sorted({r.gpu for r in profiles}):
        printed = {r.name: r.free for r in profiles if r.gpu == gpu}
        key = tuple(sorted(printed.items()))
        if table and key not in starts_of:
            starts_of[key] = [
                {r.profile: r.free_starts for r in room_left(g, table) or ()}
                for g in layouts_with_room(table, printed, gpu)
            ]
        starts = starts_of.get(key, [])
        if table and not starts:
            notes.append(f"GPU {gpu}: no layout of {table.model} leaves these free counts")
        for name in printed:
            seen = {s.get(name) for s in starts}
            if len(seen) == 1 and None not in seen:
                free_starts[(gpu, name)] = seen.pop() or ()
    if not free_starts:
        notes.insert(0, "-lgip gives free counts, not which placements are free")
    rows = tuple(
        ProfileRoom(
            r.gpu,
            r.name,
            r.profile_id,
            r.free,
            r.total,
            own[r.name].memory_slices if r.name in own else None,
            own[r.name].starts if r.name in own else (),
            free_starts.get((r.gpu, r.name)),
            r.memory_gib,
            r.sm,
        )
        for r in profiles
    )
    if free_starts:
        notes.insert(0, "free placements: the ones every layout with these free counts leaves open")
    return MigCatalogue(
        rows,
        table.memory_slices if table else 8,
        choice.model or " or ".join(choice.fits) or None,
        "-lgip",
        tuple(notes),
    )


def _lgipp_catalogue(
    placements: Mapping[int, Mapping[int, tuple[tuple[int, ...], int]]], model: str | None
) -> MigCatalogue:
    """``-lgipp`` as a catalogue: every allowed placement per profile id (``-lgipp`` lists them all, taken or
    not), named after the profile table that has exactly these placements."""
    tables = _tables_with_placements(placements, model)
    notes = ["-lgipp lists every allowed placement, free or not"]
    if len(tables) > 1:
        notes.append(
            f"profile names depend on the GPU model ({', '.join(t.model for t in tables)}): "
            "pass the model to name them"
        )
    table = tables[0] if len(tables) == 1 else None
    rows = []
    for gpu, per_id in placements.items():
        for pid, (starts, size) in per_id.items():
            prof = table.by_id(pid) if table else None
            shape = {_shape(t, pid) for t in tables}
            name = prof.name if prof else (shape.pop() if len(shape) == 1 else f"profile {pid}")
            rows.append(ProfileRoom(gpu, name, pid, None, prof.max_instances if prof else None, size, starts))
    slices = max(
        (s + size for per_id in placements.values() for starts, size in per_id.values() for s in starts),
        default=8,
    )
    return MigCatalogue(tuple(rows), slices, table.model if table else model, "-lgipp", tuple(notes))


def _tables_with_placements(
    placements: Mapping[int, Mapping[int, tuple[tuple[int, ...], int]]], model: str | None
) -> list[MigProfileTable]:
    """The profile tables whose ids have exactly these placements (the named model's table when given)."""
    found = [t for t in MIG_PROFILE_TABLES.values() if _same_placements(t, placements)]
    if not model:
        return found
    chosen = choose_table((), model).table
    if chosen is not None and not _same_placements(chosen, placements):
        raise RequestError(
            f"these -lgipp placements are not those of {chosen.model} (model given: {model!r})",
            hint=(
                f"they are those of {' or '.join(t.model for t in found)}: give one of those, or leave the model "
                "out"
                if found
                else "leave the model out"
            ),
        )
    return [chosen] if chosen else []


def _same_placements(
    table: MigProfileTable, placements: Mapping[int, Mapping[int, tuple[tuple[int, ...], int]]]
) -> bool:
    for per_id in placements.values():
        for pid, (starts, size) in per_id.items():
            prof = table.by_id(pid)
            if prof is None or (prof.starts, prof.memory_slices) != (starts, size):
                return False
    return True


def _shape(table: MigProfileTable, pid: int) -> str:
    """``1g``/``2g``/``1g+me``: the part of a profile's name that does not depend on the GPU's memory."""
    prof = table.by_id(pid)
    if prof is None:
        return f"profile {pid}"
    _ci, gi, _gb, me = parse_profile_name(prof.name)
    return f"{gi}g{'+me' if me else ''} ({prof.memory_slices} memory slice{'s' if prof.memory_slices > 1 else ''})"


def read_mig_capture(text: str, where: str, *, model: str | None = None) -> MigCapture:
    """Any saved MIG output of ``nvidia-smi`` (see :data:`MIG_KINDS`), recognised by its structure."""
    kind = sniff(text)
    if kind == "lgi":
        return MigCapture(kind, layout=parse_mig_lgi(text, gpu_model=model))
    if kind == "list":
        devices, layout = parse_smi_list(text, gpu_model=model)
        return MigCapture(kind, layout=layout, devices=tuple(devices), model=model)
    if kind == "cgi":
        return MigCapture(kind, layout=parse_mig_cgi_log(text, gpu_model=model))
    if kind == "lgip":
        return MigCapture(kind, profiles=tuple(parse_mig_lgip(text)), model=model)
    if kind == "lgipp":
        return MigCapture(kind, placements=parse_mig_lgipp(text), model=model)
    if kind == "lci":
        return MigCapture(kind, compute_instances=tuple(parse_mig_lci(text)))
    raise ParseError(
        "MIG output",
        text[:120],
        hint=f"{where} looks like `{kind}` output; expected one of `nvidia-smi mig -lgi`, "
        "`nvidia-smi -L`, a `mig -cgi -C` log, `mig -lgip`, `mig -lgipp` or `mig -lci`"
        + ("; `slurmlab topo` reads topology" if kind.startswith("topo") else ""),
    )


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
    raise RequestError(
        f"{where}: `nvidia-smi mig -{capture.kind}` is a catalogue, not a layout",
        hint="`slurmlab mig FILE` reads catalogues; for a layout save `nvidia-smi mig -lgi` or `nvidia-smi -L`",
    )


def probe_report(lines: Sequence[str], prefix: str) -> dict[str, object] | None:
    """The JSON object a probe step printed after ``prefix`` (None when no line carries it)."""
    for line in lines:
        if line.startswith(prefix):
            try:
                data = json.loads(line[len(prefix) :])
            except json.JSONDecodeError:
                raise ParseError(
                    "probe report", line[:300], hint="the step printed a broken JSON line"
                ) from None
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
    gpu_data = [
        {"index": g.get("index"), "name": g.get("name"), "uuid": g.get("uuid"), "cpus": g.get("cpus") or None}
        for g in gpus
        if isinstance(g, Mapping)
    ]
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
        return shown, [
            f"the step sees only this allocation's GPUs, numbered 0-{len(shown) - 1}; "
            f"Slurm calls them IDX {', '.join(map(str, idx))}"
        ]
    return tuple(i for i in idx if i in shown), []
