"""The answers of the sandbox's stand-in ``nvidia-smi``, rendered from its hardware file (pure: data in, text out).

A slurmlab sandbox has no GPU, so a step that runs ``nvidia-smi`` would find none (``execve(): No such file``). The
sandbox therefore puts a stand-in on its nodes' PATH that answers from the hardware profile it was built from
(:data:`~slurmlab.core.gpu.hardware_profile.HARDWARE_FILE`), for the GPUs the step can see: ``-L``, ``topo -m``,
``nvlink -s``, ``mig -lgi``, ``mig -lgip`` and the default summary, in nvidia-smi's own formats so that slurmlab's
parsers (:mod:`slurmlab.core.gpu.smi`) read them. Its first and last lines begin with
:data:`~slurmlab.core.gpu.standin_names.STANDIN_MARK`, so a reader can tell it from the real tool and the parsers
skip them.

The GPUs a step sees are numbered from 0, in the order Slurm lists them, as nvidia-smi numbers them on a real
cluster under ``ConstrainDevices``; the last line says which of the node's GPUs (Slurm's GRES index) they are,
since the sandbox's own ``CUDA_VISIBLE_DEVICES`` keeps the node's numbering (no device cgroup there).

Why these modules import nothing else of slurmlab: the sandbox copies them into ``<sandbox>/bin/nvidia-smi``
(:mod:`.scripts`), run by the nodes' ``python3``, where slurmlab may not be installed. So it uses the standard
library only besides the names it shares with slurmlab's readers (:mod:`slurmlab.core.gpu.standin_names`: the mark,
the made-up UUIDs), slurmlab's one table of NVLink facts (:mod:`slurmlab.core.gpu.nvlink.models`: the links
``nvlink -s`` prints per GPU and their speed are that table's) and its data side (:mod:`.devices`), all standard
library only and copied in before it, without their imports of each other; the names the data side repeats from
the rest of slurmlab (the MIG slice label, the MIG profile ids) are checked equal by the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.gpu.nvlink.models import nvlink_model_for
from slurmlab.core.gpu.standin_names import STANDIN_MARK, made_up_uuid
from slurmlab.sandbox.standin.devices import (
    GRID,
    MEMORY_SLICES,
    SUPPORTED,
    GridRow,
    StandinDevice,
    StandinGpu,
    StandinHardware,
    StandinMig,
    gb_names,
    gi_ids,
    grid_row,
    mig_slice_label,
    parents_of,
    visible_devices,
)

__all__ = ["answer"]


# ---- the outputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    hw: StandinHardware
    devices: list[StandinDevice]
    origin: str  # where the visible devices came from
    node: str

    @property
    def parents(self) -> list[StandinGpu]:
        return parents_of(self.devices)

    def number(self, gpu: StandinGpu) -> int:
        """The GPU's index as this step's nvidia-smi shows it (from 0, in Slurm's order)."""
        return [p.index for p in self.parents].index(gpu.index)

    def gpu_uuid(self, gpu: StandinGpu) -> str:
        return "GPU-" + made_up_uuid(self.hw.name, self.node, "gpu", gpu.index)

    def mig_uuid(self, mig: StandinMig) -> str:
        return "MIG-" + made_up_uuid(self.hw.name, self.node, "mig", mig.pos)

    def migs_of(self, gpu: StandinGpu) -> list[StandinMig]:
        return [d.mig for d in self.devices if d.mig is not None and d.gpu.index == gpu.index]

    def head(self) -> str:
        return (
            f"{STANDIN_MARK} for nvidia-smi: no real GPU here; the GPUs of hardware profile {self.hw.name} "
            f"on {self.node}"
        )

    def tail(self) -> str:
        if not self.devices:
            return f"{STANDIN_MARK}: {self.origin}"
        shown = []
        for d in self.devices:
            n = self.number(d.gpu)
            if d.mig is not None:
                label = mig_slice_label(d.gpu.index, d.mig.profile, d.mig.start, d.mig.size)
                shown.append(f"GPU {n} = the node's GPU {d.gpu.index}, MIG slice {label} (Slurm IDX {d.idx})")
            else:
                shown.append(f"GPU {n} = the node's GPU {d.gpu.index} (Slurm IDX {d.idx})")
        mig = any(d.mig is not None for d in self.devices)
        return (
            f"{STANDIN_MARK}: {'; '.join(shown)}; from {self.origin}. The sandbox has no device cgroup, so "
            "its CUDA_VISIBLE_DEVICES keeps the node's numbering where a real cluster under ConstrainDevices "
            "numbers from 0, as here"
            + (
                "; and it names a MIG slice by Slurm's index where a real cluster gives its MIG-<uuid>"
                if mig
                else ""
            )
        )


def _listing(s: _Step) -> str:
    lines = []
    for gpu in s.parents:
        lines.append(f"GPU {s.number(gpu)}: {gpu.name} (UUID: {s.gpu_uuid(gpu)})")
        for k, m in enumerate(s.migs_of(gpu)):
            lines.append(f"  MIG {m.profile:<11} Device {k:>2}: (UUID: {s.mig_uuid(m)})")
    return "\n".join(lines)


def _link(hw: StandinHardware, a: StandinGpu, b: StandinGpu) -> str:
    if a.index == b.index:
        return " X "
    n = hw.links(a, b)
    if n > 0:
        return f"NV{n}"
    return "NODE" if a.numa == b.numa else "SYS"


_LEGEND = (
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
)


def _topo(s: _Step) -> str:
    parents = s.parents
    cols = [f"GPU{s.number(g)}" for g in parents]
    lines = ["\t" + "\t".join([*cols, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for g in parents:
        cells = [_link(s.hw, g, other) for other in parents]
        numa = "N/A" if g.numa is None else str(g.numa)
        lines.append("\t".join([f"GPU{s.number(g)}", *cells, g.cores, numa, "N/A"]))
    return "\n".join(lines + list(_LEGEND))


def _nvlink_status(s: _Step) -> tuple[str, list[str]]:
    """``nvlink -s``: per GPU with NVLink, each link at its model's speed (NVLINK_MODELS), all active; and why a GPU
    was left out. A GPU without NVLink prints nothing, as nvidia-smi does, so a step without any prints no line."""
    lines, left_out = [], []
    for gpu in s.parents:
        row = nvlink_model_for(gpu.name)
        peers = sum(s.hw.links(gpu, other) for other in s.hw.gpus if other.index != gpu.index)
        if not peers:
            left_out.append(
                f"GPU {s.number(gpu)} prints no links: hardware profile {s.hw.name} gives it no NVLink"
            )
            continue
        if row is None:
            # the profile joins it by NVLink but slurmlab knows neither how many links its model has nor their speed
            left_out.append(
                f"GPU {s.number(gpu)} prints no links: slurmlab has no NVLink figures for {gpu.name}"
            )
            continue
        lines.append(f"GPU {s.number(gpu)}: {gpu.name} (UUID: {s.gpu_uuid(gpu)})")
        lines += [f"\t Link {k}: {row.reported_gbps:g} GB/s" for k in range(row.links_per_gpu)]
    return "\n".join(lines), [f"{STANDIN_MARK}: {why}" for why in left_out]


_BOX = "+" + "-" * 77 + "+"
_LGI_BOX = "+" + "-" * 55 + "+"


def _boxed(text: str, width: int = 77) -> str:
    return f"| {text:<{width - 2}} |"


def _lgi(s: _Step) -> str | None:
    ids = gi_ids(s.hw)
    rows = []
    for gpu in s.parents:
        for m in s.migs_of(gpu):
            row = grid_row(m.profile, m.size)
            pid = row[3] if row else 0
            place = f"{m.start}:{m.size}"
            rows += [
                _boxed(
                    f"{s.number(gpu):>2}  MIG {m.profile:<13} {pid:>4} {ids.get(m.pos, 0):>8}"
                    f"          {place:<6}",
                    55,
                ),
                _LGI_BOX,
            ]
    if not rows:
        return None
    return "\n".join(
        [
            _LGI_BOX,
            _boxed("GPU instances:", 55),
            _boxed("GPU   Name             Profile  Instance   Placement", 55),
            _boxed("                         ID       ID       Start:Size", 55),
            "|" + "=" * 55 + "|",
            *rows,
        ]
    )


def _free(instances: Sequence[StandinMig], row: GridRow) -> int:
    """How many more GIs of a grid row still fit beside ``instances`` (greedy over its placements)."""
    used = {k for m in instances for k in range(m.start, m.start + m.size)}
    free = 0
    for start in row[5]:
        span = set(range(start, start + row[1]))
        if max(span) < MEMORY_SLICES and not span & used:
            used |= span
            free += 1
    return min(free, row[4])


def _gib(gpu: StandinGpu, memory_slices: int) -> str:
    return f"{gpu.memory_mib * memory_slices / MEMORY_SLICES / 1024:.2f}"


def _lgip(s: _Step) -> str | None:
    parents = [g for g in s.parents if s.migs_of(g)]
    if not parents:
        return None
    out = [
        _BOX,
        _boxed("GPU instance profiles:"),
        _boxed("GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC"),
        _boxed("                             Free/Total   GiB              CE    JPEG  OFA"),
        "|" + "=" * 77 + "|",
    ]
    for gpu in parents:
        here = [m for m in s.hw.migs if m.gpu == gpu.index]
        names = gb_names(gpu, here)
        for row in GRID:
            name = names[(row[0], row[1])] + ("+me" if row[2] else "")
            sm, dec, enc, ce, jpeg, ofa = row[6]
            count = f"{_free(here, row)}/{row[4]}"
            out += [
                _boxed(
                    f"{s.number(gpu):>2}  MIG {name:<13} {row[3]:>3}     {count:<10} {_gib(gpu, row[1]):<10} "
                    f"No     {sm:<6} {dec:<5} {enc}"
                ),
                _boxed(f"{'':<59}{ce:<6} {jpeg:<5} {ofa}"),
                _BOX,
            ]
    return "\n".join(out)


def _row3(left: str, middle: str, right: str) -> str:
    """A line of the summary's GPU table: three cells, the first left-aligned, the others right-aligned."""
    return f"| {left:<39} | {middle:>20} | {right:>20} |"


def _summary(s: _Step, now: str) -> str:
    if not s.parents:
        return f"{now}\nNo devices were found"
    bar = "+" + "-" * 41 + "+" + "-" * 22 + "+" + "-" * 22 + "+"
    out = [
        now,
        "+" + "-" * 87 + "+",
        _boxed(f"{'NVIDIA-SMI (' + STANDIN_MARK + ')':<42} Driver Version: N/A    CUDA Version: N/A", 87),
        bar,
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                      |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 22 + "+" + "=" * 22 + "|",
    ]
    for gpu in s.parents:
        mig = bool(s.migs_of(gpu))
        mem = "N/A" if mig else f"0MiB / {gpu.memory_mib}MiB"
        out += [
            _row3(
                f"{s.number(gpu):>3}  {gpu.name[:28]:<28}   On",
                f"{gpu.pci_bus_id:<16} Off",
                "N/A" if mig else "0",
            ),
            _row3("N/A   N/A    P0            N/A /  N/A", mem, f"{'N/A' if mig else '0%':>7}      Default"),
            _row3("", "", "Enabled" if mig else "Disabled"),
            bar,
        ]
    migs = [(gpu, m) for gpu in s.parents for m in s.migs_of(gpu)]
    if migs:
        ids = gi_ids(s.hw)
        sep = "+------------------+----------------------+-----------+-----------------------+"
        out += [
            "",
            _BOX,
            _boxed("MIG devices:"),
            sep,
            "| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |",
            "|      ID  ID  Dev |                      | SM     Unc| CE  ENC  DEC  OFA  JPG|",
            "|                  |                      |        ECC|                       |",
            "|==================+======================+===========+=======================|",
        ]
        for gpu, m in migs:
            row = grid_row(m.profile, m.size)
            sm, dec, enc, ce, jpeg, ofa = row[6] if row else (0, 0, 0, 0, 0, 0)
            mem = f"0MiB / {gpu.memory_mib * m.size // MEMORY_SLICES}MiB"
            dev = s.migs_of(gpu).index(m)
            out += [
                f"| {s.number(gpu):>2}  {ids.get(m.pos, 0):>3}  {0:>2}  {dev:>2}  | {mem:>20} | {sm:<3}   N/A |"
                f" {ce:>2}  {enc:>2}   {dec:>2}   {ofa:>2}   {jpeg:>2} |",
                sep,
            ]
    out += [
        "",
        "+" + "-" * 87 + "+",
        _boxed("Processes:", 87),
        _boxed(" GPU   GI   CI        PID   Type   Process name                            GPU Memory", 87),
        _boxed("       ID   ID                                                             Usage", 87),
        "|" + "=" * 87 + "|",
        _boxed(" No running processes found", 87),
        "+" + "-" * 87 + "+",
    ]
    return "\n".join(out)


def answer(
    argv: Sequence[str], doc: Mapping[str, object], env: Mapping[str, str], now: str = ""
) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of ``nvidia-smi <argv>`` in a step with environment ``env`` on a sandbox node
    whose hardware file holds ``doc``; ``now`` is the date line of the summary."""
    args = list(argv)
    hw = StandinHardware.from_doc(doc)
    devices, origin = visible_devices(hw, env)
    step = _Step(hw, devices, origin, env.get("SLURMD_NODENAME") or (hw.nodes or ("?",))[0])
    if args in (["-h"], ["--help"]):
        usage = (
            f"usage: nvidia-smi [-L | topo -m | nvlink -s | mig -lgi | mig -lgip]; this stand-in answers "
            f"{SUPPORTED}"
        )
        return f"{step.head()}\n{usage}\n{step.tail()}\n", "", 0
    body: str | None
    notes: list[str] = []  # the stand-in's own lines about this answer, before its last one
    if not args:
        body = _summary(step, now or "(date)")
    elif args in (["-L"], ["--list-gpus"]):
        body = _listing(step) if devices else "No devices were found"
    elif args in (["topo", "-m"], ["topo", "--matrix"]):
        body = _topo(step) if devices else "No devices were found"
    elif args in (["nvlink", "-s"], ["nvlink", "--status"]):
        body, notes = _nvlink_status(step) if devices else ("No devices were found", [])
    elif args in (["mig", "-lgi"], ["mig", "--list-gpu-instances"]):
        body = _lgi(step) or "No MIG-enabled devices found."
    elif args in (["mig", "-lgip"], ["mig", "--list-gpu-instance-profiles"]):
        body = _lgip(step) or "No MIG-enabled devices found."
    else:
        # as nvidia-smi answers an option it does not know, then what the stand-in does answer
        return (
            (
                "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
                f"{STANDIN_MARK}: it answers {SUPPORTED}, not {' '.join(args)!r}\n"
            ),
            "",
            2,
        )
    rc = 6 if body.endswith(("No devices were found", "No MIG-enabled devices found.")) else 0
    return "\n".join([step.head(), *([body] if body else []), *notes, step.tail()]) + "\n", "", rc
