"""Probes that ask an allocated node for its GPU topology and MIG layout, as steps of the allocation: what
``alloc.topology()`` and ``alloc.mig()`` answer with (the one live way; ``slurmlab.topology()`` and
``slurmlab.mig()`` read saved captures and profiles without an allocation).

Sources, in the order :func:`node_topology` tries them:

1. ``sandbox``: the allocation's cluster is a slurmlab sandbox (its hardware file sits next to the runner's
   ``SLURM_CONF``, see :mod:`slurmlab.core.gpu.hardware_profile`). Its GPUs are fake, so the hardware profile
   it was built from is the truth (the sandbox's stand-in ``nvidia-smi`` answers from the same profile, labelled).
2. ``nvidia-smi``: ``nvidia-smi topo -m`` (and ``-L`` for models/UUIDs, ``nvlink -s`` for each link's state) run
   as steps on the node; without a readable ``nvlink -s`` the topology comes without link state, and says why.
3. ``nvml``: ``nvidia-ml-py`` (pynvml) in a ``python3`` step on the node, when nvidia-smi is not on its PATH.

Every result says which source answered and what was tried before it. Nothing probes hardware at import.
:func:`job_topology` and :func:`job_mig` ask every node of the job (side by side, each as its own step) and
answer with node -> model; a node that gives no answer is listed with why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from slurmlab.core.gpu.captures import (
    NVML_REPORT_PREFIX,
    probe_report,
    topology_from_nvml_report,
    visible_gpus,
)
from slurmlab.core.gpu.hardware_profile import SandboxHardware
from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.core.gpu.smi import parse_smi_list, parse_topo_matrix
from slurmlab.core.gpu.smi.nvlink import read_nvlink_status
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError, SlurmlabError, SourceUnavailable
from slurmlab.slurm.hardware_files import sandbox_hardware

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.steps import StepResult

__all__ = ["NVML_PROBE", "PROBE_SOURCES", "job_mig", "job_topology", "node_mig", "node_topology"]

PROBE_SOURCES = ("sandbox", "nvidia-smi", "nvml")
_STEP_TIMEOUT = 60.0
_PARALLEL_NODES = 8  # probe steps at once (each is a short srun on its own node)

M = TypeVar("M", NodeTopology, NodeMig)


def _alloc_node(alloc: Allocation, node: str | None) -> str:
    if alloc.job is None and alloc.running:
        alloc.refresh()
    nodes = alloc.nodes
    if node is None:
        if not nodes:
            raise RequestError(
                f"allocation {alloc.job_id} has no nodes yet ({alloc.state})",
                hint="wait for it to run: alloc.wait()",
            )
        return nodes[0]
    if nodes and node not in nodes:
        raise RequestError(
            f"node {node!r} is not in allocation {alloc.job_id} (its nodes: {', '.join(nodes)})"
        )
    return node


def _job_nodes(alloc: Allocation) -> list[str]:
    if alloc.job is None and alloc.running:
        alloc.refresh()
    if not alloc.nodes:
        raise RequestError(
            f"allocation {alloc.job_id} has no nodes yet ({alloc.state})",
            hint="wait for it to run: alloc.wait()",
        )
    return alloc.nodes


def _every_node(alloc: Allocation, probe: Callable[[str], M]) -> tuple[dict[str, M], dict[str, str]]:
    """``probe`` on each node of the job, side by side: (node -> answer, node -> why none), in node order.

    When no node answers, the first node's error is raised as it is (it names every source tried)."""
    nodes = _job_nodes(alloc)
    outcome: dict[str, M | SlurmlabError] = {}

    def one(node: str) -> None:
        try:
            outcome[node] = probe(node)
        except SlurmlabError as exc:  # SourceUnavailable, or a node without MIG: said per node
            outcome[node] = exc

    if len(nodes) == 1:
        one(nodes[0])  # in this thread: Ctrl-C ends the probe step at once, as for any step
    else:
        with ThreadPoolExecutor(
            max_workers=min(_PARALLEL_NODES, len(nodes)), thread_name_prefix="slurmlab-probe"
        ) as pool:
            list(pool.map(one, nodes))
    found = {n: r for n in nodes if not isinstance(r := outcome[n], SlurmlabError)}
    first = outcome[nodes[0]]
    if not found and isinstance(first, SlurmlabError):  # every value is an error here
        raise first
    missing = {
        n: "; ".join(x.strip() for x in r.message.splitlines() if x.strip())
        for n in nodes
        if isinstance(r := outcome[n], SlurmlabError)
    }
    return found, missing


def job_topology(alloc: Allocation, *, source: str = "auto") -> JobTopology:
    """The topology of every node of the allocation (this job's GPUs marked on each); see :func:`node_topology`."""
    _order(source)
    found, missing = _every_node(alloc, lambda node: node_topology(alloc, node, source=source))
    return JobTopology(alloc.job_id, found, missing)


def job_mig(alloc: Allocation, *, source: str = "auto") -> JobMig:
    """The MIG layout of every node of the allocation that has MIG (its slices outlined); see :func:`node_mig`."""
    _order(source)
    found, missing = _every_node(alloc, lambda node: node_mig(alloc, node, source=source))
    return JobMig(alloc.job_id, found, missing)


def _slurm_idx(alloc: Allocation, node: str) -> tuple[int, ...]:
    job = alloc.job
    if job is None:
        return ()
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


def _standin_note(result: StepResult) -> list[str]:
    """Say so when the answer came from a sandbox's stand-in nvidia-smi (its hardware profile, not a GPU)."""
    if any(STANDIN_MARK in line for line in (*result.stdout, *result.stderr)):
        return [
            f"answered by the sandbox's stand-in nvidia-smi ({STANDIN_MARK}): its hardware profile, no real GPU"
        ]
    return []


def _with_link_state(alloc: Allocation, node: str, topo: Topology) -> tuple[Topology, str | None, list[str]]:
    """``topo`` with each GPU's link state from ``nvidia-smi nvlink -s`` in a step on ``node``, as a saved capture
    gets it (:meth:`Topology.with_nvlink_status`), and where it came from; or ``topo`` as it is with a note why not.

    Link state is extra: an nvidia-smi without ``nvlink``, a failing step or output that does not fit the topology
    leaves the topology as it is."""
    res = _step(alloc, node, ["nvidia-smi", "nvlink", "-s"])
    what = f"nvidia-smi nvlink -s on {node}"
    lines = [ln for ln in res.stdout if ln.strip() and not ln.lstrip().startswith(STANDIN_MARK)]
    if not res.ok:
        # nvidia-smi puts its refusal of an option it lacks on stdout, not stderr
        said = "" if any(x.strip() for x in res.stderr) or not lines else ": " + " / ".join(lines)[:200]
        return topo, None, [f"no NVLink link state: {what} failed ({_why(res)}{said})"]
    text = "\n".join(res.stdout)
    if not lines:  # nvidia-smi prints nothing for GPUs without NVLink
        return topo, None, [f"no NVLink link state: {what} printed no link (these GPUs have no NVLink)"]
    # NVML's words for a GPU whose links are all down (or that has no NVLink bridge fitted), instead of its links
    if any("all links are inactive" in ln.lower() for ln in lines):
        return (
            topo,
            None,
            [
                f"no NVLink link state: {what} says every link of a GPU is inactive (no NVLink bridge "
                "fitted, or its links are down); see the output of `nvidia-smi nvlink -s` on the node"
            ],
        )
    try:
        return topo.with_nvlink_status(read_nvlink_status(text, what)), what, []
    except ParseError as exc:
        return (
            topo,
            None,
            [
                f"no NVLink link state: {what} could not be read: "
                + "; ".join(x.strip() for x in str(exc).splitlines() if x.strip())
            ],
        )


def _sandbox(alloc: Allocation, node: str, tried: list[str]) -> SandboxHardware | None:
    """The sandbox's hardware when the allocation runs in one that knows ``node``; else why not, in ``tried``."""
    try:
        hw = sandbox_hardware(alloc.runner)
    except ParseError as exc:
        tried.append(f"sandbox: {exc}")
        return None
    if hw is None:
        tried.append("sandbox: the cluster is not a slurmlab sandbox")
    elif node not in hw.nodes:
        tried.append(f"sandbox: {node} is not one of its nodes ({', '.join(hw.nodes)})")
        return None
    return hw


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
            hw = _sandbox(alloc, node, tried)
            if hw is not None:
                return hw.node_topology(node, idx, tried=tried)
            continue
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
                    topo = topo.with_gpu_details(
                        {
                            d.index: (d.name, d.uuid)
                            for d in smi_devices
                            if d.parent is None and d.index in known
                        }
                    )
                topo, link_source, link_notes = _with_link_state(alloc, node, topo)
            # the parsers' warnings; not the ResourceWarnings other threads' pipes happen to raise meanwhile
            notes = [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]
            notes += _standin_note(res) + link_notes
            gpus, more = visible_gpus(topo, idx)
            detail = f"nvidia-smi topo -m on {node}" + (
                f"; link state from {link_source}" if link_source else ""
            )
            return NodeTopology(
                topo, "nvidia-smi", detail, node, gpus, idx, {}, tuple(tried), tuple(notes + more)
            )
        if name == "nvml":
            res = _step(alloc, node, ["python3", "-c", NVML_PROBE])
            report = probe_report(res.stdout, NVML_REPORT_PREFIX) if res.ok else None
            if report is None:
                tried.append(
                    f"NVML (python3 + nvidia-ml-py) on {node}: "
                    + (_why(res) if not res.ok else "no report (is nvidia-ml-py installed there?)")
                )
                continue
            if "error" in report:
                tried.append(f"NVML on {node}: {report['error']}")
                continue
            topo = topology_from_nvml_report(report)
            gpus, more = visible_gpus(topo, idx)
            return NodeTopology(
                topo, "nvml", f"NVML (nvidia-ml-py) on {node}", node, gpus, idx, {}, tuple(tried), tuple(more)
            )
    raise SourceUnavailable(
        f"no topology source answered for {node} of allocation {alloc.job_id}:\n  " + "\n  ".join(tried),
        hint="load a saved capture with slurmlab.topology('topo-m.txt') or a profile with "
        "slurmlab.topology(profile='dgx-h100')",
    )


def _order(source: str) -> tuple[str, ...]:
    allowed = PROBE_SOURCES
    if source == "auto":
        return allowed
    if source not in allowed:
        raise RequestError(
            f"unknown topology source {source!r}", hint=f"choose auto or one of: {', '.join(allowed)}"
        )
    return (source,)


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


def node_mig(alloc: Allocation, node: str | None = None, *, source: str = "auto") -> NodeMig:
    """The MIG layout of an allocated node (default: its first) with this allocation's slices highlighted."""
    order = _order(source)
    node = _alloc_node(alloc, node)
    idx = _slurm_idx(alloc, node)
    tried: list[str] = []
    for name in order:
        if name == "sandbox":
            hw = _sandbox(alloc, node, tried)
            if hw is not None:
                return hw.node_mig(node, idx, tried=tried)
            continue
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
            notes = [
                "placements come from the `-L` listing (inferred); under ConstrainDevices the step "
                "lists only this allocation's slices",
                *_standin_note(listing),
            ]
            return NodeMig(
                layout_l,
                "nvidia-smi",
                f"nvidia-smi -L in a step on {node}",
                node,
                mine,
                tuple(tried),
                tuple(notes),
            )
        if name == "nvml":
            tried.append("NVML: MIG layouts are read with nvidia-smi only")
    raise SourceUnavailable(
        f"no MIG source answered for {node} of allocation {alloc.job_id}:\n  " + "\n  ".join(tried),
        hint="load a saved `nvidia-smi mig -lgi` capture with slurmlab.mig(path)",
    )
