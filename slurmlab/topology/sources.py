"""Where a node's GPU topology and MIG layout come from, and which source answered.

Sources, in the order :func:`node_topology` tries them for an allocation:

1. ``sandbox``: the allocation's cluster is a slurmlab sandbox (its ``state.json`` sits next to the runner's
   ``SLURM_CONF``). Its GPUs are fake, so the hardware profile it was built from is the truth; running
   nvidia-smi there would describe the host instead.
2. ``nvidia-smi``: ``nvidia-smi topo -m`` (and ``-L`` for models/UUIDs) run as a step on the node.
3. ``nvml``: ``nvidia-ml-py`` (pynvml) in a ``python3`` step on the node, when nvidia-smi is not on its PATH.

Without an allocation: ``from_file`` (saved nvidia-smi text or a profile JSON) and ``from_profile`` (a built-in
hardware profile). Every result says which source answered and what was tried before it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.smi_parse import parse_mig_lgi, parse_smi_list, parse_topo_matrix, sniff
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError, SandboxError, SourceUnavailable

if TYPE_CHECKING:
    from slurmlab.sandbox import Profile, Sandbox
    from slurmlab.slurm.allocation import Allocation, StepResult
    from slurmlab.slurm.runner import Runner

__all__ = [
    "SOURCES",
    "NodeMig",
    "NodeTopology",
    "SourceUnavailable",
    "from_file",
    "from_profile",
    "mig_from_file",
    "mig_from_profile",
    "node_mig",
    "node_topology",
    "profile_gres_devices",
    "profile_names",
    "sandbox_node_topology",
    "sandbox_of",
    "topology_from_nvml_report",
]

SOURCES = ("file", "profile", "sandbox", "nvidia-smi", "nvml")
_STEP_TIMEOUT = 60.0


def _with_provenance(lines: list[str], tried: tuple[str, ...], notes: tuple[str, ...]) -> str:
    """A summary's lines followed by the sources tried first and the notes."""
    return "\n".join(lines + [f"tried first: {t}" for t in tried] + [f"note: {n}" for n in notes])


def _pre(text: str) -> str:
    import html

    return f"<pre>{html.escape(text)}</pre>"


@dataclass(frozen=True)
class NodeTopology:
    """A node's topology, the source it came from, and (for an allocation) the GPUs it holds there."""

    topology: Topology
    source: str  # one of SOURCES
    detail: str  # what exactly answered: "profile dgx-h100 of the sandbox in /tmp/…", "nvidia-smi topo -m on node1"
    node: str | None = None
    gpus: tuple[int, ...] = ()  # the allocation's GPUs on this node, as topology indices
    slurm_gpus: tuple[int, ...] = ()  # the same GPUs as Slurm's IDX (differs in MIG sandboxes, see gpu_of_idx)
    idx_to_gpu: Mapping[int, int] = field(default_factory=dict)  # Slurm IDX -> topology index where not equal
    tried: tuple[str, ...] = ()  # sources tried first, with why they did not answer
    notes: tuple[str, ...] = ()
    gpu_type: str | None = None  # Slurm's GRES type of the whole GPUs (h100), where the source knows it

    def gpu_of_idx(self, idx: int) -> int:
        """The topology index of the GPU Slurm calls ``IDX:idx`` on this node."""
        return self.idx_to_gpu.get(idx, idx)

    def summary(self) -> str:
        head = f"topology of {self.node}" if self.node else "topology"
        lines = [f"{head} — source: {self.source} ({self.detail})"]
        if self.gpus:
            lines.append(f"this allocation's GPUs here: {', '.join(map(str, self.gpus))}")
        lines.append(self.topology.summary())
        return _with_provenance(lines, self.tried, self.notes)

    __str__ = summary

    def _repr_html_(self) -> str:
        return _pre(self.summary())

    def figure_args(self) -> dict[str, Any]:
        """Arguments of ``slurmlab.viz.topology_figure``: ``topology_figure(**nt.figure_args())``."""
        return {"topo": self.topology, "highlight_gpus": self.gpus}


@dataclass(frozen=True)
class NodeMig:
    """A node's MIG layout, its source, and the instances this allocation holds (keys for ``mig_figure``)."""

    layout: MigLayout
    source: str
    detail: str
    node: str | None = None
    highlight: tuple[Any, ...] = ()  # (gpu, "start:size") pairs or MIG UUIDs
    tried: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        head = f"MIG layout of {self.node}" if self.node else "MIG layout"
        lines = [f"{head} — source: {self.source} ({self.detail})"]
        if self.highlight:
            lines.append("this allocation's instances: " + ", ".join(
                f"GPU {h[0]} at {h[1]}" if isinstance(h, tuple) else str(h) for h in self.highlight))
        lines.append(self.layout.summary())
        return _with_provenance(lines, self.tried, self.notes)

    __str__ = summary

    def _repr_html_(self) -> str:
        return _pre(self.summary())

    def figure_args(self) -> dict[str, Any]:
        """Arguments of ``slurmlab.viz.mig_figure``: ``mig_figure(**nm.figure_args())``."""
        return {"layout": self.layout, "highlight": self.highlight}


# ---- files and profiles -----------------------------------------------------------------------------


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError("topology file", os.fspath(path), hint=f"cannot read it: {exc.strerror}") from None


def _json_or_none(text: str) -> Any:
    if not text.lstrip().startswith("{"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("hardware profile JSON", text[:200], hint=f"not valid JSON: {exc}") from None


def from_file(path: str | os.PathLike[str], *, model: str | None = None) -> NodeTopology:
    """A topology from a saved ``nvidia-smi topo -m`` capture or a hardware-profile JSON file."""
    text = _read(path)
    data = _json_or_none(text)
    if data is not None:
        topo = Topology.from_profile(data)
        return NodeTopology(topo.with_model(model) if model else topo, "file",
                            f"hardware profile in {os.fspath(path)}")
    kind = sniff(text)
    if kind != "topo":
        raise ParseError("nvidia-smi topo -m output", text[:120],
                         hint=f"{os.fspath(path)} looks like `{kind}` output; save `nvidia-smi topo -m` instead")
    return NodeTopology(parse_topo_matrix(text, gpu_model=model), "file",
                        f"nvidia-smi topo -m saved in {os.fspath(path)}")


def mig_from_file(path: str | os.PathLike[str], *, model: str | None = None) -> NodeMig:
    """A MIG layout from saved ``nvidia-smi mig -lgi`` / ``nvidia-smi -L`` output or a profile JSON file."""
    text = _read(path)
    data = _json_or_none(text)
    if data is not None:
        return NodeMig(MigLayout.from_profile(data), "file", f"hardware profile in {os.fspath(path)}")
    return NodeMig(_parse_mig_text(text, model, os.fspath(path)), "file", f"saved in {os.fspath(path)}")


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


def _profile(name_or_profile: str | Profile) -> Profile:
    from slurmlab.sandbox import load_profile

    return load_profile(name_or_profile) if isinstance(name_or_profile, str) else name_or_profile


def _profile_dict(profile: Profile) -> dict[str, Any]:
    data: dict[str, Any] = dataclasses.asdict(profile)
    return data


def from_profile(name_or_profile: str | Profile) -> NodeTopology:
    """The topology of a built-in hardware profile (``dgx-h100``, ``h200-mig``, ``seed``)."""
    prof = _profile(name_or_profile)
    return NodeTopology(Topology.from_profile(_profile_dict(prof)), "profile", f"hardware profile {prof.name}",
                        gpu_type=_whole_type(prof))


def profile_names() -> list[str]:
    """The built-in hardware profiles (``from_profile`` takes these names)."""
    from slurmlab.sandbox import list_profiles

    return list_profiles()


def _whole_type(prof: Profile) -> str | None:
    types = {g.model for g in prof.whole_gpus}
    return types.pop() if len(types) == 1 else None


def mig_from_profile(name_or_profile: str | Profile) -> NodeMig:
    """The MIG layout of a built-in hardware profile (RequestError when it has none)."""
    prof = _profile(name_or_profile)
    return NodeMig(MigLayout.from_profile(_profile_dict(prof)), "profile", f"hardware profile {prof.name}")


def profile_gres_devices(profile: Profile) -> list[tuple[int, int | None]]:
    """Per Slurm GRES IDX of a sandbox node: (GPU index, MIG instance position in ``profile.mig`` or None).

    Slurm numbers a node's gpu GRES by type, types in the order gres.conf first names them and records of one
    type in file order (seen in the h200-mig sandbox: ``--gres=gpu:3g.71gb:1`` got IDX 13 after 4 whole GPUs
    and 9 ``1g.18gb``), so whole GPUs of a MIG profile do not keep their index as IDX.
    """
    from slurmlab.sandbox.render import device_files

    devices = device_files(profile)
    order: list[str | None] = []
    for d in devices:
        if d.gres_type not in order:
            order.append(d.gres_type)
    mig_pos = {len(profile.gpus) + k: k for k in range(len(profile.mig))}
    out: list[tuple[int, int | None]] = []
    for typ in order:
        for d in devices:
            if d.gres_type == typ:
                out.append((d.gpu.index, mig_pos.get(d.number) if d.mig_profile else None))
    return out


# ---- the allocation's cluster -----------------------------------------------------------------------


def sandbox_of(runner: Runner) -> Sandbox | None:
    """The slurmlab sandbox the runner talks to (its state.json next to SLURM_CONF), or None."""
    conf = runner.environ().get("SLURM_CONF")
    if not conf:
        return None
    folder = Path(conf).absolute().parent
    from slurmlab.sandbox import Sandbox
    from slurmlab.sandbox.control import STATE_FILE

    if not (folder / STATE_FILE).is_file():
        return None
    try:
        return Sandbox.find(str(folder))
    except SandboxError:
        return None


def sandbox_node_topology(runner: Runner, node: str) -> NodeTopology | None:
    """A sandbox node's topology without an allocation (all its nodes share the profile); None elsewhere."""
    sb = sandbox_of(runner)
    if sb is None:
        return None
    prof = sb.profile
    if node not in prof.node_names:
        raise RequestError(f"node {node!r} is not in the sandbox (its nodes: {', '.join(prof.node_names)})")
    return NodeTopology(Topology.from_profile(_profile_dict(prof)), "sandbox",
                        f"hardware profile {prof.name} of the sandbox in {sb.directory}", node,
                        gpu_type=_whole_type(prof))


def _alloc_node(alloc: Allocation, node: str | None) -> str:
    if alloc.job is None and alloc.running:
        alloc.refresh()
    nodes = alloc.nodes
    if node is None:
        if not nodes:
            raise RequestError(f"allocation {alloc.job_id} has no nodes yet ({alloc.state})",
                               hint="wait for it to run: alloc.wait()")
        return nodes[0]
    if nodes and node not in nodes:
        raise RequestError(f"node {node!r} is not in allocation {alloc.job_id} (its nodes: {', '.join(nodes)})")
    return node


def _slurm_idx(alloc: Allocation, node: str) -> tuple[int, ...]:
    job = alloc.job
    if job is None:
        return ()
    found = job.gpu_alloc(node) if hasattr(job, "gpu_alloc") else None
    if found is None:
        found = next((a for a in job.gpu_allocs if a.node == node), None)
    return tuple(found.gpu_indices) if found is not None else ()


def _quiet(_stream: str, _line: str) -> None:
    return None


def _step(alloc: Allocation, node: str, argv: list[str]) -> StepResult:
    return alloc.srun(argv, args=["-w", node, "-N1", "-n1"], on_output=_quiet, timeout=_STEP_TIMEOUT)


def _why(result: StepResult) -> str:
    text = " / ".join(line for line in result.stderr if line.strip())[-300:]
    if result.interrupted:
        return f"timed out after {_STEP_TIMEOUT:g} s"
    return f"exit {result.returncode}" + (f": {text}" if text else "")


def node_topology(alloc: Allocation, node: str | None = None, *, source: str = "auto") -> NodeTopology:
    """The topology of an allocated node (default: its first), from the first source that answers.

    ``source`` forces one of ``sandbox``, ``nvidia-smi``, ``nvml`` (``auto`` tries them in that order).
    """
    order = _order(source)
    node = _alloc_node(alloc, node)
    idx = _slurm_idx(alloc, node)
    tried: list[str] = []
    for name in order:
        if name == "sandbox":
            sb = sandbox_of(alloc.runner)
            if sb is None:
                tried.append("sandbox: the cluster is not a slurmlab sandbox")
                continue
            prof = sb.profile
            devices = profile_gres_devices(prof)
            # a MIG slice counts as its parent GPU here: its NUMA node and CPUs are the parent's
            mapping = {i: gpu for i, (gpu, _pos) in enumerate(devices) if gpu != i}
            topo = Topology.from_profile(_profile_dict(prof))
            gpus = tuple(dict.fromkeys(mapping.get(i, i) for i in idx))
            slices = [f"IDX {i} is a MIG {prof.mig[pos].profile} slice of GPU {gpu}"
                      for i in idx if i < len(devices) for gpu, pos in [devices[i]] if pos is not None]
            return NodeTopology(topo, "sandbox", f"hardware profile {prof.name} of the sandbox in {sb.directory}",
                                node, gpus, idx, mapping, tuple(tried), tuple(slices), gpu_type=_whole_type(prof))
        if name == "nvidia-smi":
            res = _step(alloc, node, ["nvidia-smi", "topo", "-m"])
            if not res.ok:
                tried.append(f"nvidia-smi topo -m on {node}: {_why(res)}")
                continue
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                topo = parse_topo_matrix("\n".join(res.stdout))
                listing = _step(alloc, node, ["nvidia-smi", "-L"])
                if listing.ok:
                    smi_devices, _mig = parse_smi_list("\n".join(listing.stdout))
                    known = {g.index for g in topo.gpus}
                    topo = topo.with_gpu_details({d.index: (d.name, d.uuid) for d in smi_devices
                                                  if d.parent is None and d.index in known})
            notes = [str(w.message) for w in caught]
            gpus, more = _visible_gpus(topo, idx)
            return NodeTopology(topo, "nvidia-smi", f"nvidia-smi topo -m on {node}", node, gpus, idx, {},
                                tuple(tried), tuple(notes + more))
        if name == "nvml":
            res = _step(alloc, node, ["python3", "-c", NVML_PROBE])
            report = _json_line(res.stdout, "SLURMLAB_NVML ") if res.ok else None
            if report is None:
                tried.append(f"NVML (python3 + nvidia-ml-py) on {node}: "
                             + (_why(res) if not res.ok else "no report (is nvidia-ml-py installed there?)"))
                continue
            if "error" in report:
                tried.append(f"NVML on {node}: {report['error']}")
                continue
            topo = topology_from_nvml_report(report)
            gpus, more = _visible_gpus(topo, idx)
            return NodeTopology(topo, "nvml", f"NVML (nvidia-ml-py) on {node}", node, gpus, idx, {},
                                tuple(tried), tuple(more))
    raise SourceUnavailable(
        f"no topology source answered for {node} of allocation {alloc.job_id}:\n  " + "\n  ".join(tried),
        hint="load a saved capture with slurmlab.topology.from_file('topo-m.txt') or a profile with "
             "from_profile('dgx-h100')",
    )


def _order(source: str) -> tuple[str, ...]:
    allowed = ("sandbox", "nvidia-smi", "nvml")
    if source == "auto":
        return allowed
    if source not in allowed:
        raise RequestError(f"unknown topology source {source!r}", hint=f"choose auto or one of: {', '.join(allowed)}")
    return (source,)


def _visible_gpus(topo: Topology, idx: tuple[int, ...]) -> tuple[tuple[int, ...], list[str]]:
    """Which GPUs of a live capture are the allocation's, and a note when the step saw only those."""
    shown = tuple(g.index for g in topo.gpus)
    if idx and len(shown) == len(idx) and set(shown) != set(idx):
        # a device cgroup (ConstrainDevices=yes) shows the step only its GPUs, renumbered from 0
        return shown, [f"the step sees only this allocation's GPUs, numbered 0-{len(shown) - 1}; "
                       f"Slurm calls them IDX {', '.join(map(str, idx))}"]
    return tuple(i for i in idx if i in shown), []


def _json_line(lines: Sequence[str], prefix: str) -> dict[str, Any] | None:
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


# Runs on the node with the node's python3; prints one JSON line. pynvml is imported there, never here.
NVML_PROBE = r"""
import json
try:
    import pynvml as N
    N.nvmlInit()
except Exception as exc:
    print("SLURMLAB_NVML " + json.dumps({"error": "nvidia-ml-py unavailable: %s" % exc})); raise SystemExit(0)
n = N.nvmlDeviceGetCount()
h = [N.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
def text(v):
    return v.decode() if isinstance(v, bytes) else v
bus = {text(N.nvmlDeviceGetPciInfo(d).busId): i for i, d in enumerate(h)}
gpus, links = [], {}
for i, d in enumerate(h):
    name, uuid = text(N.nvmlDeviceGetName(d)), text(N.nvmlDeviceGetUUID(d))
    try:
        mask = N.nvmlDeviceGetCpuAffinity(d, 64)
        cpus = [w * 64 + b for w, v in enumerate(mask) for b in range(64) if (v >> b) & 1]
    except Exception:
        cpus = None
    gpus.append({"index": i, "name": name, "uuid": uuid, "cpus": cpus})
    for l in range(18):
        try:
            if N.nvmlDeviceGetNvLinkState(d, l) != 1:
                continue
            rb = text(N.nvmlDeviceGetNvLinkRemotePciInfo(d, l).busId)
        except Exception:
            continue
        j = bus.get(rb)
        if j is not None and j != i:
            links["%d-%d" % (min(i, j), max(i, j))] = links.get("%d-%d" % (min(i, j), max(i, j)), 0) + 1
pcie = {}
names = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
for i in range(n):
    for j in range(i + 1, n):
        try:
            pcie["%d-%d" % (i, j)] = names.get(int(N.nvmlDeviceGetTopologyCommonAncestor(h[i], h[j])), "SYS")
        except Exception:
            pass
print("SLURMLAB_NVML " + json.dumps({"gpus": gpus, "nvlink_ends": links, "pcie": pcie}))
"""


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


# ---- MIG --------------------------------------------------------------------------------------------


def node_mig(alloc: Allocation, node: str | None = None, *, source: str = "auto") -> NodeMig:
    """The MIG layout of an allocated node with this allocation's instances highlighted."""
    order = _order(source)
    node = _alloc_node(alloc, node)
    idx = _slurm_idx(alloc, node)
    tried: list[str] = []
    for name in order:
        if name == "sandbox":
            sb = sandbox_of(alloc.runner)
            if sb is None:
                tried.append("sandbox: the cluster is not a slurmlab sandbox")
                continue
            prof = sb.profile
            if not prof.mig:
                raise RequestError(f"the sandbox's profile {prof.name} has no MIG instances",
                                   hint="start one with MIG: `slurmlab sandbox up --profile h200-mig`")
            devices = profile_gres_devices(prof)
            highlight = []
            for i in idx:
                if i < len(devices) and devices[i][1] is not None:
                    inst = prof.mig[devices[i][1] or 0]
                    highlight.append((inst.gpu, f"{inst.start}:{inst.size}"))
            return NodeMig(MigLayout.from_profile(_profile_dict(prof)), "sandbox",
                           f"hardware profile {prof.name} of the sandbox in {sb.directory}", node,
                           tuple(highlight), tuple(tried))
        if name == "nvidia-smi":
            listing = _step(alloc, node, ["nvidia-smi", "-L"])
            if not listing.ok:
                tried.append(f"nvidia-smi -L on {node}: {_why(listing)}")
                continue
            devices_l, layout_l = parse_smi_list("\n".join(listing.stdout))
            mine = tuple(d.uuid for d in devices_l if d.parent is not None)
            if layout_l is None:
                tried.append(f"nvidia-smi -L on {node}: no MIG devices visible (MIG mode off)")
                continue
            # -L carries the MIG UUIDs the step was given (CUDA_VISIBLE_DEVICES=MIG-…), so the allocation's
            # slices are matched exactly; `mig -lgi` has placements but no UUIDs to match by
            layout = layout_l
            notes = ["placements come from the `-L` listing (inferred); under ConstrainDevices the step "
                     "lists only this allocation's slices"]
            return NodeMig(layout, "nvidia-smi", f"nvidia-smi -L in a step on {node}", node, mine,
                           tuple(tried), tuple(notes))
        if name == "nvml":
            tried.append("NVML: MIG layouts are read with nvidia-smi only")
    raise SourceUnavailable(
        f"no MIG source answered for {node} of allocation {alloc.job_id}:\n  " + "\n  ".join(tried),
        hint="load a saved `nvidia-smi mig -lgi` capture with slurmlab.topology.mig_from_file(path)",
    )
