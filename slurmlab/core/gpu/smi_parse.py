"""Parsers of ``nvidia-smi`` text: ``topo -m``, ``topo -c``, ``nvlink -s``/``-c``, ``mig -lgip``/``-lgipp``/
``-lgi``/``-lci``, ``mig -cgi`` logs and ``-L``.

They go by structure (header names, row labels, table borders), never by column position: real captures
differ in tabs vs spaces, ANSI escapes, NIC naming and empty cells. A token that does not fit is a
:class:`~slurmlab.errors.ParseError` quoting it. A capture cut short parses as far as it goes, with a
:class:`SmiParseWarning` and ``complete=False`` on the result.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from slurmlab.core.gpu.mig import (
    ComputeInstance,
    GpuInstance,
    GpuMig,
    MigLayout,
    MigProfileTable,
    parse_profile_name,
    table_for_model,
    table_for_profile_names,
    tables_for_profile_names,
)
from slurmlab.core.gpu.topology import Gpu, Link, LinkKind, Nic, Topology, parse_cpu_list
from slurmlab.errors import ParseError

__all__ = [
    "MigDevice",
    "MigProfileRow",
    "NvlinkStatus",
    "SmiDevice",
    "SmiParseWarning",
    "parse_mig_cgi_log",
    "parse_mig_devices",
    "parse_mig_lci",
    "parse_mig_lgi",
    "parse_mig_lgip",
    "parse_mig_lgipp",
    "parse_nvlink_capabilities",
    "parse_nvlink_status",
    "parse_smi_list",
    "parse_topo_cpu",
    "parse_topo_p2p",
    "parse_topo_matrix",
    "sniff",
]


class SmiParseWarning(UserWarning):
    """A capture parsed only in part (it was cut short)."""


_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_DEVICE_RE = re.compile(r"^[A-Za-z][\w.:\-]*$")
_GPU_RE = re.compile(r"^GPU(0|[1-9]\d{0,3})$")
_HUGE_NUMBER = re.compile(r"\d{19,}")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _clean(text: str) -> list[str]:
    if not isinstance(text, str):
        raise ParseError("nvidia-smi output", repr(text)[:200], hint="pass the captured text as a str")
    huge = _HUGE_NUMBER.search(text)
    if huge:
        raise ParseError("number in nvidia-smi output", huge.group(0)[:40], hint="no field of nvidia-smi is this long")
    # \d and int() take other scripts' digits, isdigit() even superscripts int() refuses;
    # nvidia-smi prints ASCII digits only, so any other digit is corruption
    for m in _NON_ASCII.finditer(text):
        if m.group(0).isdigit():
            raise ParseError("number in nvidia-smi output", m.group(0), hint="nvidia-smi prints ASCII digits only")
    return _ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _warn(message: str) -> None:
    warnings.warn(message, SmiParseWarning, stacklevel=3)


# ------------------------------------------------------------------------------------------------------
# nvidia-smi topo -m
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Header:
    devices: tuple[str, ...]
    trailing: tuple[str, ...]
    trailing_at: tuple[int, ...]  # character offset of each trailing column (space-aligned captures)


def _parse_header(line: str) -> _Header:
    positions = sorted((line.find(name), name) for name in _TRAILING if line.find(name) >= 0)
    cut = positions[0][0] if positions else len(line)
    devices = tuple(line[:cut].split())
    if not devices:
        raise ParseError("nvidia-smi topo -m header", line, hint="expected device columns such as GPU0 GPU1 ...")
    for d in devices:
        if not _DEVICE_RE.match(d):
            raise ParseError("nvidia-smi topo -m column name", d, hint="expected names like GPU0, NIC0 or mlx5_0")
    if not _GPU_RE.match(devices[0]):
        raise ParseError("nvidia-smi topo -m header", line, hint="the first column should be GPU0")
    if len(set(devices)) != len(devices):
        raise ParseError("nvidia-smi topo -m header", line, hint="a column name appears twice")
    # what follows the device columns must be exactly the known affinity columns
    rest = line[cut:]
    trailing: list[str] = []
    offsets: list[int] = []
    pos = 0
    while True:
        stripped = rest[pos:].lstrip()
        if not stripped:
            break
        pos = len(rest) - len(stripped)
        for name in _TRAILING:
            if stripped.startswith(name):
                trailing.append(name)
                offsets.append(cut + pos)
                pos += len(name)
                break
        else:
            raise ParseError(
                "nvidia-smi topo -m header", stripped.split()[0],
                hint="after the device columns only 'CPU Affinity', 'NUMA Affinity' and 'GPU NUMA ID' are known",
            )
    if len(set(trailing)) != len(trailing):
        raise ParseError("nvidia-smi topo -m header", line, hint="an affinity column appears twice")
    return _Header(devices, tuple(trailing), tuple(offsets))


def _row_cells(line: str) -> tuple[list[str], list[int]]:
    """Cells of a matrix row and their character offsets; tab-separated captures keep their empty cells."""
    if "\t" in line:
        cells: list[str] = []
        offsets: list[int] = []
        pos = 0
        body = line.lstrip(" ")
        base = len(line) - len(body)
        for part in body.split("\t"):
            cells.append(part.strip())
            offsets.append(base + pos)
            pos += len(part) + 1
        if cells and cells[0] == "":
            # a tab-indented row label (seen in `topo -p2p`); the label is the next cell
            cells, offsets = cells[1:], offsets[1:]
        return cells, offsets
    found = [(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]
    return [f[0] for f in found], [f[1] for f in found]


def _assign_trailing(
    header: _Header, cells: list[str], offsets: list[int], tabbed: bool, label: str, line: str
) -> dict[str, str]:
    m = len(header.trailing)
    while cells and cells[-1] == "":
        cells, offsets = cells[:-1], offsets[:-1]
    if not cells:
        return {}
    if len(cells) <= m and (tabbed or len(cells) == m):
        return dict(zip(header.trailing, cells, strict=False))
    if tabbed:
        # nvidia-smi pads after NUMA Affinity with an extra tab: the last cell is the last column and
        # anything between must be empty
        head, middle, last = cells[: m - 1], cells[m - 1 : -1], cells[-1]
        if m == 0 or any(middle):
            raise ParseError(f"nvidia-smi topo -m row {label}", line.strip(),
                             hint=f"more cells than the columns {', '.join(header.trailing) or '(none)'}")
        return dict(zip(header.trailing, [*head, last], strict=False))
    if len(cells) > m:
        raise ParseError(f"nvidia-smi topo -m row {label}", line.strip(),
                         hint=f"more cells than the columns {', '.join(header.trailing) or '(none)'}")
    # space-aligned with empty cells: each value belongs to the column whose header starts nearest
    out: dict[str, str] = {}
    for cell, off in zip(cells, offsets, strict=True):
        best = min(range(m), key=lambda k: abs(header.trailing_at[k] - off))
        name = header.trailing[best]
        if name in out:
            raise ParseError(f"nvidia-smi topo -m row {label}", line.strip(),
                             hint="cannot tell which affinity column each value belongs to")
        out[name] = cell
    return out


def _affinity(value: str | None, what: str) -> frozenset[int] | None:
    if value is None or value in ("", "N/A"):
        return None
    return parse_cpu_list(value, what=what)


def parse_topo_matrix(text: str, *, gpu_model: str | None = None) -> Topology:
    """Parse ``nvidia-smi topo -m`` (also ``-mp``) into a :class:`Topology`."""
    lines = _clean(text)
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines):
        raise ParseError("nvidia-smi topo -m output", text, hint="the text is empty; capture `nvidia-smi topo -m`")
    header = _parse_header(lines[i])
    n = len(header.devices)
    i += 1
    rows: dict[str, list[str]] = {}
    affinity: dict[str, dict[str, str]] = {}
    truncated = False
    last_content = max(k for k, ln in enumerate(lines) if ln.strip())
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.strip() == "Legend:":
            break
        cells, offsets = _row_cells(line)
        label = cells[0]
        if label not in header.devices:
            raise ParseError("nvidia-smi topo -m row label", label,
                             hint=f"rows must be named after the columns {' '.join(header.devices)}")
        if label in rows:
            raise ParseError("nvidia-smi topo -m row", line.strip(), hint=f"row {label} appears twice")
        matrix = cells[1 : 1 + n]
        if len(matrix) < n or "" in matrix:
            if i == last_content:
                truncated = True
                rows[label] = [c for c in matrix if c]
                i += 1
                break
            raise ParseError(f"nvidia-smi topo -m row {label}", line.strip(),
                             hint=f"expected {n} link cells, one per column")
        rows[label] = matrix
        tail = _assign_trailing(header, cells[1 + n :], offsets[1 + n :], "\t" in line, label, line)
        if tail and not _GPU_RE.match(label):
            raise ParseError(f"nvidia-smi topo -m row {label}", line.strip(),
                             hint="only GPU rows carry CPU/NUMA affinity")
        affinity[label] = tail
        i += 1
    if not rows:
        raise ParseError("nvidia-smi topo -m output", "\n".join(lines[: i + 1]),
                         hint="no matrix rows follow the header; was the capture cut short?")

    nic_legend: dict[str, str] = {}
    section = ""
    while i < len(lines):
        raw = lines[i]
        s = raw.strip()
        i += 1
        if not s:
            continue
        if s in ("Legend:", "NIC Legend:"):
            section = s
            continue
        if section == "Legend:" and re.match(r"^\S+\s*=\s*\S.*$", s):
            continue
        m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
        if section == "NIC Legend:" and m:
            nic_legend[m.group(1)] = m.group(2)
            continue
        raise ParseError("nvidia-smi topo -m line", s,
                         hint="after the matrix only the Legend and NIC Legend sections are expected")

    # links from rows; a pair shown twice must agree (the matrix is symmetric)
    links: dict[frozenset[str], Link] = {}
    p2p = sorted({c for m in rows.values() for c in m} & _P2P_STATUS.keys())
    if p2p:
        raise ParseError("nvidia-smi topo -m cell", p2p[0],
                         hint="this is `nvidia-smi topo -p2p` output; read it with parse_topo_p2p")
    for label, matrix in rows.items():
        for col, token in zip(header.devices, matrix, strict=False):
            if col == label:
                if token != "X":
                    raise ParseError(f"nvidia-smi topo -m cell {label}/{col}", token,
                                     hint="the diagonal of the matrix must be X")
                continue
            link = Link.from_token(label, col, token)
            if link.kind is LinkKind.SELF:
                raise ParseError(f"nvidia-smi topo -m cell {label}/{col}", token,
                                 hint="X (self) may only appear on the diagonal")
            key = frozenset((label, col))
            seen = links.get(key)
            if seen is not None and (seen.kind, seen.nvlinks) != (link.kind, link.nvlinks):
                raise ParseError(f"nvidia-smi topo -m cells {label}/{col}", f"{seen.label} vs {token}",
                                 hint="the matrix is not symmetric; the capture looks damaged")
            if seen is None:
                links[key] = link

    notes: list[str] = []
    missing = [d for d in header.devices if d not in rows]
    if truncated or missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        notes.append("capture is incomplete: " + (f"no rows for {shown}" if missing else "")
                     + ("; " if missing and truncated else "") + ("last row cut short" if truncated else ""))
        _warn(f"nvidia-smi topo -m: {notes[-1]}; parsed what is there")
    if any(lk.label == "SOC" for lk in links.values()):
        notes.append("SOC (older drivers) read as SYS")

    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for d in header.devices:
        gm = _GPU_RE.match(d)
        if gm:
            aff = affinity.get(d, {})
            gid = aff.get("GPU NUMA ID")
            if gid in (None, "", "N/A"):
                gpu_numa_id = None
            elif gid is not None and gid.isdigit():
                gpu_numa_id = int(gid)
            else:
                raise ParseError(f"GPU NUMA ID of {d}", str(gid), hint="expected a number or N/A")
            gpus.append(Gpu(
                index=int(gm.group(1)),
                name=d,
                cpu_affinity=_affinity(aff.get("CPU Affinity"), f"CPU affinity of {d}"),
                numa_affinity=_affinity(aff.get("NUMA Affinity"), f"NUMA affinity of {d}"),
                gpu_numa_id=gpu_numa_id,
                model=gpu_model,
            ))
        else:
            nics.append(Nic(d, nic_legend.get(d, d)))
    unknown = set(nic_legend) - {n.name for n in nics}
    if unknown:
        raise ParseError("nvidia-smi topo -m NIC Legend", ", ".join(sorted(unknown)),
                         hint="the legend names NICs that are not columns of the matrix")
    topo = Topology(gpus=tuple(gpus), nics=tuple(nics), links=tuple(links.values()),
                    complete=not (truncated or missing), notes=tuple(notes))
    return topo.with_model(gpu_model)


_P2P_STATUS = {
    "OK": "supported", "CNS": "chipset not supported", "GNS": "GPU not supported",
    "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey", "U": "unknown",
}


def parse_topo_p2p(text: str) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -p2p r|w|rw|n|a``: (GPU a, GPU b) -> status code (OK, CNS, GNS, TNS, NS, DR, U)."""
    lines = _clean(text)
    body = [ln for ln in lines if ln.strip()]
    if not body:
        raise ParseError("nvidia-smi topo -p2p output", text, hint="the text is empty")
    cols = body[0].split()
    if not cols or not all(_GPU_RE.match(c) for c in cols):
        raise ParseError("nvidia-smi topo -p2p header", body[0], hint="expected GPU0 GPU1 ...")
    out: dict[tuple[int, int], str] = {}
    for line in body[1:]:
        cells = line.split()
        if cells[0] == "Legend:":
            break
        if not _GPU_RE.match(cells[0]) or cells[0] not in cols or len(cells) != len(cols) + 1:
            raise ParseError("nvidia-smi topo -p2p row", line.strip(), hint=f"expected a label and {len(cols)} cells")
        a = int(cells[0][3:])
        for col, cell in zip(cols, cells[1:], strict=True):
            b = int(col[3:])
            if a == b:
                if cell != "X":
                    raise ParseError(f"nvidia-smi topo -p2p cell {cells[0]}/{col}", cell, hint="diagonal must be X")
                continue
            if cell not in _P2P_STATUS:
                raise ParseError(f"nvidia-smi topo -p2p cell {cells[0]}/{col}", cell,
                                 hint=f"known codes: {', '.join(_P2P_STATUS)}")
            out[(a, b)] = cell
    if not out:
        raise ParseError("nvidia-smi topo -p2p output", text, hint="no rows found")
    return out


def parse_topo_cpu(text: str) -> tuple[int, tuple[int, ...]]:
    """``nvidia-smi topo -c N``: (the CPU, the GPUs with affinity to it)."""
    lines = [ln.strip() for ln in _clean(text) if ln.strip()]
    m = re.match(r"^The GPUs that have an affinity with CPU (\d+) are:$", lines[0]) if lines else None
    if m is None:
        raise ParseError("nvidia-smi topo -c output", text, hint="expected 'The GPUs that have an affinity ...'")
    gpus: list[int] = []
    for ln in lines[1:]:
        for part in ln.split(","):
            part = part.strip()
            if not part.isdigit():
                raise ParseError("nvidia-smi topo -c GPU list", ln, hint="expected GPU indices like '6, 7'")
            gpus.append(int(part))
    return int(m.group(1)), tuple(gpus)


# ------------------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s / -c, nvidia-smi -L
# ------------------------------------------------------------------------------------------------------
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)$")


@dataclass(frozen=True)
class NvlinkStatus:
    gpu: int
    model: str
    uuid: str
    links: tuple[tuple[int, float | None], ...]  # (link, GB/s as reported) ; None = inactive
    capabilities: tuple[tuple[int, str, bool], ...] = ()

    @property
    def active_links(self) -> int:
        return sum(1 for _, v in self.links if v is not None)

    @property
    def total_gbps(self) -> float:
        return sum(v for _, v in self.links if v is not None)


def _gpu_blocks(text: str, what: str) -> list[tuple[re.Match[str], list[str]]]:
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for raw in _clean(text):
        s = raw.strip()
        if not s:
            continue
        m = _GPU_LINE.match(s)
        if m:
            blocks.append((m, []))
        elif not blocks:
            raise ParseError(what, s, hint="expected the output to start with 'GPU <n>: <name> (UUID: GPU-...)'")
        else:
            blocks[-1][1].append(s)
    if not blocks:
        raise ParseError(what, text, hint="no 'GPU <n>: ...' line found")
    return blocks


def parse_nvlink_status(text: str) -> list[NvlinkStatus]:
    """``nvidia-smi nvlink -s`` (``--status``): per GPU, the speed of each link."""
    out = []
    for m, body in _gpu_blocks(text, "nvidia-smi nvlink -s output"):
        links: list[tuple[int, float | None]] = []
        for s in body:
            lm = re.match(r"^Link (\d+): (?:([\d.]+) GB/s|<inactive>|Inactive)$", s)
            if lm is None:
                raise ParseError("nvidia-smi nvlink -s line", s, hint="expected 'Link <n>: <speed> GB/s'")
            links.append((int(lm.group(1)), float(lm.group(2)) if lm.group(2) else None))
        out.append(NvlinkStatus(int(m.group(1)), m.group(2), m.group(3), tuple(links)))
    return out


def parse_nvlink_capabilities(text: str) -> list[NvlinkStatus]:
    """``nvidia-smi nvlink -c``: per GPU and link, each capability true/false."""
    out = []
    for m, body in _gpu_blocks(text, "nvidia-smi nvlink -c output"):
        caps: list[tuple[int, str, bool]] = []
        for s in body:
            cm = re.match(r"^Link (\d+), (.+?): (true|false)$", s)
            if cm is None:
                raise ParseError("nvidia-smi nvlink -c line", s, hint="expected 'Link <n>, <capability>: true|false'")
            caps.append((int(cm.group(1)), cm.group(2), cm.group(3) == "true"))
        out.append(NvlinkStatus(int(m.group(1)), m.group(2), m.group(3), (), tuple(caps)))
    return out


@dataclass(frozen=True)
class SmiDevice:
    """A line of ``nvidia-smi -L``: a GPU, or a MIG device under ``parent``."""

    index: int
    name: str
    uuid: str
    parent: int | None = None  # GPU index for a MIG device


def parse_smi_list(text: str) -> tuple[list[SmiDevice], MigLayout | None]:
    """``nvidia-smi -L``: the devices, and a MIG layout (placements unknown) when MIG devices are listed."""
    devices: list[SmiDevice] = []
    gpu_rows: dict[int, tuple[str, str]] = {}
    mig_rows: dict[int, list[tuple[int, str, str]]] = {}
    current: int | None = None
    for raw in _clean(text):
        s = raw.strip()
        if not s:
            continue
        m = _GPU_LINE.match(s)
        if m:
            current = int(m.group(1))
            if current in gpu_rows:
                raise ParseError("nvidia-smi -L line", s, hint=f"GPU {current} is listed twice")
            gpu_rows[current] = (m.group(2), m.group(3))
            devices.append(SmiDevice(current, m.group(2), m.group(3)))
            mig_rows[current] = []
            continue
        mm = re.match(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)$", s)
        if mm and current is not None:
            parse_profile_name(mm.group(1))
            mig_rows[current].append((int(mm.group(2)), mm.group(1), mm.group(3)))
            devices.append(SmiDevice(int(mm.group(2)), mm.group(1), mm.group(3), parent=current))
            continue
        raise ParseError("nvidia-smi -L line", s,
                         hint="expected 'GPU <n>: <name> (UUID: GPU-...)' or 'MIG <profile> Device <n>: (UUID: MIG-...)'")
    if not devices:
        raise ParseError("nvidia-smi -L output", text, hint="no GPU lines found")
    if not any(mig_rows.values()):
        return devices, None
    gpus = []
    names = []
    for idx, (model, uuid) in gpu_rows.items():
        insts = _instances_from_listing(idx, mig_rows[idx])
        names += [i.profile for i in insts]
        gpus.append(GpuMig(index=idx, instances=tuple(insts), model=model, uuid=uuid))
    table = table_for_model(next(iter(gpu_rows.values()))[0]) or table_for_profile_names(names)
    layout = MigLayout(gpus=tuple(gpus), table=table,
                       notes=("placements are not in `nvidia-smi -L`; shown where they fit, largest first (inferred)",))
    return devices, layout.with_inferred_placements()


def _instances_from_listing(gpu: int, rows: list[tuple[int, str, str]]) -> list[GpuInstance]:
    """Group -L's MIG devices into GPU instances: ``<c>c.<gi>`` CIs fill a GI until its compute is used."""
    out: list[GpuInstance] = []
    open_gi: dict[str, list[ComputeInstance]] = {}
    for dev, name, uuid in rows:
        ci_c, gi_c, _gb, _me = parse_profile_name(name)
        gi_name = name.split(".", 1)[1] if ci_c is not None else name
        ci = ComputeInstance(ci_id=None, name=name, compute_slices=ci_c or gi_c, uuid=uuid, device=dev)
        if ci_c is None:
            out.append(GpuInstance(gpu=gpu, profile=name, compute_slices=gi_c, compute_instances=(ci,)))
            continue
        group = open_gi.setdefault(gi_name, [])
        if sum(c.compute_slices for c in group) + ci.compute_slices > gi_c:
            out.append(GpuInstance(gpu=gpu, profile=gi_name, compute_slices=gi_c, compute_instances=tuple(group)))
            group = open_gi[gi_name] = []
        group.append(ci)
    for gi_name, group in open_gi.items():
        if group:
            gi_c = parse_profile_name(gi_name)[1]
            out.append(GpuInstance(gpu=gpu, profile=gi_name, compute_slices=gi_c, compute_instances=tuple(group)))
    return out


# ------------------------------------------------------------------------------------------------------
# nvidia-smi mig -lgip / -lgipp / -lgi / -lci / -cgi
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MigProfileRow:
    """One row of ``nvidia-smi mig -lgip``."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int | None = None
    jpeg: int | None = None
    ofa: int | None = None


_BORDER = re.compile(r"^\+[-=+]*\+$|^\|[=+]+\|$")


def _box_rows(text: str, what: str, titles: tuple[str, ...], headers: tuple[str, ...]) -> tuple[list[str], bool]:
    """The data rows (inner text of ``| ... |`` lines) of an nvidia-smi box table, and whether a title was seen."""
    rows: list[str] = []
    titled = False
    for raw in _clean(text):
        s = raw.strip()
        if not s or _BORDER.match(s):
            continue
        if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
            raise ParseError(what, s, hint="expected the boxed table nvidia-smi prints")
        inner = s[1:-1].strip()
        if inner in titles:
            titled = True
            continue
        if not inner or any(inner.startswith(h) for h in headers) or re.match(r"^(ID|Instance|Free/Total)\b", inner):
            continue
        rows.append(inner)
    return rows, titled


def parse_mig_lgip(text: str) -> list[MigProfileRow]:
    """``nvidia-smi mig -lgip``: the GI profiles of each GPU with free/total counts."""
    rows, titled = _box_rows(text, "nvidia-smi mig -lgip output", ("GPU instance profiles:",), ("GPU   Name",))
    out: list[MigProfileRow] = []
    pending: MigProfileRow | None = None
    for inner in rows:
        m = re.match(
            r"^(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)$", inner)
        if m:
            if pending is not None:
                raise ParseError("nvidia-smi mig -lgip row", inner, hint="a profile row lacks its CE/JPEG/OFA line")
            parse_profile_name(m.group(2))
            free, total = int(m.group(4)), int(m.group(5))
            if free > total:
                raise ParseError("nvidia-smi mig -lgip instances", f"{free}/{total}", hint="free exceeds total")
            pending = MigProfileRow(int(m.group(1)), m.group(2), int(m.group(3)), free, total, float(m.group(6)),
                                    m.group(7) == "Yes", int(m.group(8)), int(m.group(9)), int(m.group(10)))
            continue
        c = re.match(r"^(\d+)\s+(\d+)\s+(\d+)$", inner)
        if c and pending is not None:
            out.append(MigProfileRow(**{**pending.__dict__, "ce": int(c.group(1)), "jpeg": int(c.group(2)),
                                        "ofa": int(c.group(3))}))
            pending = None
            continue
        raise ParseError("nvidia-smi mig -lgip row", inner,
                         hint="expected '<gpu> MIG <profile> <id> <free>/<total> <GiB> <P2P> <SM> <DEC> <ENC>'")
    if pending is not None:
        out.append(pending)
        _warn(f"nvidia-smi mig -lgip: the last row ({pending.name}) lacks its CE/JPEG/OFA line")
    if not out:
        raise ParseError("nvidia-smi mig -lgip output", text, hint="no profile rows found")
    if not titled:
        _warn("nvidia-smi mig -lgip: no table title; the capture starts mid-table")
    return out


def parse_mig_lgipp(text: str) -> dict[int, dict[int, tuple[tuple[int, ...], int]]]:
    """``nvidia-smi mig -lgipp``: GPU -> profile id -> (allowed starts, size) in memory slices."""
    out: dict[int, dict[int, tuple[tuple[int, ...], int]]] = {}
    for raw in _clean(text):
        s = raw.strip()
        if not s:
            continue
        m = re.match(r"^GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}:(\d+)$", s)
        if m is None:
            raise ParseError("nvidia-smi mig -lgipp line", s,
                             hint="expected 'GPU <n> Profile ID <id> Placements: {0,2,4}:2'")
        starts = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
        if not starts:
            raise ParseError("nvidia-smi mig -lgipp placements", s, hint="no placement start listed")
        out.setdefault(int(m.group(1)), {})[int(m.group(2))] = (starts, int(m.group(4)))
    if not out:
        raise ParseError("nvidia-smi mig -lgipp output", text, hint="no 'Profile ID' lines found")
    return out


def _table_for(names: list[str], model: str | None) -> tuple[MigProfileTable | None, str | None, tuple[str, ...]]:
    """The profile table, the model to show, and a note when the profile names fit several GPU models."""
    if model:
        t = table_for_model(model)
        if t is not None:
            return t, model, ()
    found = tables_for_profile_names(names)
    if not found:
        return None, model, ()
    if len(found) > 1:
        models = ", ".join(t.model for t in found)
        return found[0], None, (f"the profile names fit {models} (same slice geometry); pass the GPU model to tell",)
    return found[0], found[0].model, ()


def parse_mig_lgi(text: str, *, gpu_model: str | None = None) -> MigLayout:
    """``nvidia-smi mig -lgi``: the GPU instances, their profiles, ids and placements."""
    rows, titled = _box_rows(text, "nvidia-smi mig -lgi output", ("GPU instances:",), ("GPU   Name",))
    per_gpu: dict[int, list[GpuInstance]] = {}
    for inner in rows:
        m = re.match(r"^(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)$", inner)
        if m is None:
            raise ParseError("nvidia-smi mig -lgi row", inner,
                             hint="expected '<gpu> MIG <profile> <profile id> <instance id> <start>:<size>'")
        _ci, gi_c, _gb, _me = parse_profile_name(m.group(2))
        gpu = int(m.group(1))
        gi_id = int(m.group(4))
        if any(i.gi_id == gi_id for i in per_gpu.get(gpu, [])):
            raise ParseError("nvidia-smi mig -lgi row", inner, hint=f"GPU instance {gi_id} appears twice")
        per_gpu.setdefault(gpu, []).append(GpuInstance(
            gpu=gpu, profile=m.group(2), compute_slices=gi_c, gi_id=gi_id, profile_id=int(m.group(3)),
            start=int(m.group(5)), size=int(m.group(6))))
    if not per_gpu:
        raise ParseError("nvidia-smi mig -lgi output", text, hint="no GPU instance rows found")
    if not titled:
        _warn("nvidia-smi mig -lgi: no table title; the capture starts mid-table")
    names = [i.profile for v in per_gpu.values() for i in v]
    table, model, notes = _table_for(names, gpu_model)
    gpus = tuple(GpuMig(index=g, instances=tuple(v), model=model) for g, v in sorted(per_gpu.items()))
    return MigLayout(gpus=gpus, table=table, complete=titled, notes=notes)


def parse_mig_lci(text: str) -> list[tuple[int, int, ComputeInstance, tuple[int, int] | None]]:
    """``nvidia-smi mig -lci``: (GPU, GI id, compute instance, CI placement start:size or None)."""
    rows, _titled = _box_rows(text, "nvidia-smi mig -lci output", ("Compute instances:",), ("GPU     GPU",))
    out: list[tuple[int, int, ComputeInstance, tuple[int, int] | None]] = []
    for inner in rows:
        m = re.match(r"^(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?$", inner)
        if m is None:
            if re.match(r"^ID\b", inner):
                continue
            raise ParseError("nvidia-smi mig -lci row", inner,
                             hint="expected '<gpu> <gi id> MIG <profile> <profile id> <ci id> [<start>:<size>]'")
        ci_c, gi_c, _gb, _me = parse_profile_name(m.group(3))
        ci = ComputeInstance(ci_id=int(m.group(5)), name=m.group(3), compute_slices=ci_c or gi_c,
                             profile_id=int(m.group(4)))
        place = (int(m.group(6)), int(m.group(7))) if m.group(6) else None
        out.append((int(m.group(1)), int(m.group(2)), ci, place))
    if not out:
        raise ParseError("nvidia-smi mig -lci output", text, hint="no compute instance rows found")
    return out


def parse_mig_cgi_log(text: str, *, gpu_model: str | None = None) -> MigLayout:
    """The log of ``nvidia-smi mig -cgi ... -C``: the GIs and CIs it created (placements not shown)."""
    per_gpu: dict[int, dict[int, GpuInstance]] = {}
    for raw in _clean(text):
        s = raw.strip()
        if not s:
            continue
        g = re.match(r"^Successfully created GPU instance ID\s+(\d+) on GPU\s+(\d+) using profile MIG (\S+) "
                     r"\(ID\s+(\d+)\)$", s)
        c = re.match(r"^Successfully created compute instance ID\s+(\d+) on GPU\s+(\d+) GPU instance ID\s+(\d+) "
                     r"using profile MIG (\S+) \(ID\s+(\d+)\)$", s)
        if g:
            gi_id, gpu, name, pid = int(g.group(1)), int(g.group(2)), g.group(3), int(g.group(4))
            per_gpu.setdefault(gpu, {})[gi_id] = GpuInstance(
                gpu=gpu, profile=name, compute_slices=parse_profile_name(name)[1], gi_id=gi_id, profile_id=pid)
        elif c:
            ci_id, gpu, gi_id, name, pid = (int(c.group(1)), int(c.group(2)), int(c.group(3)), c.group(4),
                                            int(c.group(5)))
            gi = per_gpu.get(gpu, {}).get(gi_id)
            if gi is None:
                raise ParseError("nvidia-smi mig -cgi log line", s,
                                 hint=f"compute instance on GPU instance {gi_id}, which the log did not create")
            ci_c, gi_c, _gb, _me = parse_profile_name(name)
            ci = ComputeInstance(ci_id=ci_id, name=name, compute_slices=ci_c or gi_c, profile_id=pid)
            per_gpu[gpu][gi_id] = GpuInstance(**{**gi.__dict__,
                                                 "compute_instances": (*gi.compute_instances, ci)})
        else:
            raise ParseError("nvidia-smi mig -cgi log line", s,
                             hint="expected 'Successfully created GPU|compute instance ...'")
    if not per_gpu:
        raise ParseError("nvidia-smi mig -cgi log", text, hint="no 'Successfully created' lines found")
    names = [i.profile for v in per_gpu.values() for i in v.values()]
    table, model, notes = _table_for(names, gpu_model)
    gpus = tuple(GpuMig(index=g, instances=tuple(v.values()), model=model) for g, v in sorted(per_gpu.items()))
    return MigLayout(gpus=gpus, table=table, notes=(
        "placements are not in the -cgi log; shown where they fit, largest first (inferred)", *notes,
    )).with_inferred_placements()


@dataclass(frozen=True)
class MigDevice:
    """A row of the "MIG devices" table of plain ``nvidia-smi``."""

    gpu: int
    gi_id: int
    ci_id: int
    mig_dev: int
    memory_used_mib: int | None  # None where the cell is merged with the row above (CIs sharing a GI)
    memory_total_mib: int | None
    sm: int | None


def parse_mig_devices(text: str) -> list[MigDevice]:
    """The "MIG devices" section of ``nvidia-smi`` (the "Processes" section after it is skipped)."""
    out: list[MigDevice] = []
    seen_title = False
    for raw in _clean(text):
        s = raw.strip()
        if not s or _BORDER.match(s) or re.match(r"^\+[-=+ ]+\+$", s):
            continue
        if not (s.startswith("|") and s.endswith("|")) or len(s) < 2:
            raise ParseError("nvidia-smi MIG devices line", s, hint="expected the boxed table nvidia-smi prints")
        inner = s[1:-1].strip()
        if inner == "MIG devices:":
            seen_title = True
            continue
        if inner == "Processes:":
            break
        cells = [c.strip() for c in s[1:-1].split("|")]
        m = re.match(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", cells[0])
        if m is None:
            if cells[0] == "" or cells[0].startswith(("GPU", "ID")) or re.match(r"^[=+]+$", inner):
                continue  # header lines and the BAR1 line newer drivers print under each device
            raise ParseError("nvidia-smi MIG devices row", inner, hint="expected '<gpu> <gi> <ci> <mig dev> | ...'")
        used = total = sm = None
        if len(cells) > 1 and cells[1]:
            mm = re.match(r"^(\d+)MiB\s*/\s*(\d+)MiB$", cells[1])
            if mm is None:
                raise ParseError("nvidia-smi MIG devices memory cell", cells[1], hint="expected '<used>MiB / <total>MiB'")
            used, total = int(mm.group(1)), int(mm.group(2))
        if len(cells) > 2 and cells[2]:
            sm_m = re.match(r"^(\d+)\b", cells[2])
            if sm_m is None:
                raise ParseError("nvidia-smi MIG devices SM cell", cells[2], hint="expected '<SM count> <ECC>'")
            sm = int(sm_m.group(1))
        out.append(MigDevice(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), used, total, sm))
    if not out:
        raise ParseError("nvidia-smi MIG devices table", text, hint="no MIG device rows found")
    if not seen_title:
        _warn("nvidia-smi MIG devices: no 'MIG devices:' title; the capture starts mid-table")
    return out


def sniff(text: str) -> str:
    """Which nvidia-smi output this is: topo, topo-c, topo-p2p, nvlink-s, nvlink-c, lgip, lgipp, lgi, lci, cgi,
    list (``-L``) or mig-devices."""
    body = _ANSI_RE.sub("", text)
    if "MIG devices:" in body:
        return "mig-devices"
    if "GPU instance profiles:" in body or re.search(r"\|\s*\d+\s+MIG \S+\s+\d+\s+\d+/\d+", body):
        return "lgip"
    if "GPU instances:" in body:
        return "lgi"
    if "Compute instances:" in body:
        return "lci"
    if re.search(r"Profile ID\s+\d+\s+Placements?", body):
        return "lgipp"
    if "Successfully created" in body:
        return "cgi"
    if "have an affinity with CPU" in body:
        return "topo-c"
    if re.search(r"^\s*Link \d+, ", body, re.M):
        return "nvlink-c"
    if re.search(r"^\s*Link \d+: ", body, re.M):
        return "nvlink-s"
    if re.search(r"^\s*MIG \S+\s+Device\s+\d+:", body, re.M) or re.search(r"^\s*GPU \d+: .*\(UUID:", body, re.M):
        return "list"
    if re.search(r"^\s*OK\s+= Status Ok", body, re.M):
        return "topo-p2p"
    if re.search(r"GPU0", body):
        return "topo"
    raise ParseError("nvidia-smi output", text[:200], hint="not a topo/nvlink/mig/-L capture that slurmlab knows")
