"""Parsers of ``nvidia-smi topo -m`` (also ``-mp``), ``topo -p2p`` and ``topo -c``.

They go by structure (header names, row labels), never by column position: real captures differ in tabs vs
spaces, NIC naming and empty cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmlab.core.gpu.devices import Gpu, Nic, parse_cpu_list
from slurmlab.core.gpu.links import Link, LinkKind
from slurmlab.core.gpu.smi._text import GPU_RE as _GPU_RE
from slurmlab.core.gpu.smi._text import clean as _clean
from slurmlab.core.gpu.smi._text import nonblank_lines as _nonblank_lines
from slurmlab.core.gpu.smi._text import warn as _warn
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError

__all__ = ["parse_topo_cpu", "parse_topo_matrix", "parse_topo_p2p"]

_TRAILING = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_DEVICE_RE = re.compile(r"^[A-Za-z][\w.:\-]*$")


@dataclass(frozen=True)
class _Header:
    devices: tuple[str, ...]
    trailing: tuple[str, ...]
    trailing_at: tuple[int, ...]  # character offset of each trailing column (space-aligned captures)


def _parse_header(line: str) -> _Header:
    positions = sorted((line.find(name), name) for name in _TRAILING if line.find(name) >= 0)
    cut = positions[0][0] if positions else len(line)
    devices = tuple(line[:cut].split())
    _check_device_columns(devices, line)
    trailing, offsets = _trailing_columns(line[cut:], cut)
    if len(set(trailing)) != len(trailing):
        raise ParseError("nvidia-smi topo -m header", line, hint="an affinity column appears twice")
    return _Header(devices, trailing, offsets)


def _check_device_columns(devices: tuple[str, ...], line: str) -> None:
    if not devices:
        raise ParseError(
            "nvidia-smi topo -m header", line, hint="expected device columns such as GPU0 GPU1 ..."
        )
    for d in devices:
        if not _DEVICE_RE.match(d):
            raise ParseError(
                "nvidia-smi topo -m column name", d, hint="expected names like GPU0, NIC0 or mlx5_0"
            )
    if not _GPU_RE.match(devices[0]):
        raise ParseError("nvidia-smi topo -m header", line, hint="the first column should be GPU0")
    if len(set(devices)) != len(devices):
        raise ParseError("nvidia-smi topo -m header", line, hint="a column name appears twice")


def _trailing_columns(rest: str, cut: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The affinity columns after the device columns (``rest`` starts at offset ``cut`` of the header) and their
    offsets: what follows the devices must be exactly known affinity columns."""
    trailing: list[str] = []
    offsets: list[int] = []
    pos = 0
    while stripped := rest[pos:].lstrip():
        pos = len(rest) - len(stripped)
        name = next((n for n in _TRAILING if stripped.startswith(n)), None)
        if name is None:
            raise ParseError(
                "nvidia-smi topo -m header",
                stripped.split()[0],
                hint="after the device columns only 'CPU Affinity', 'NUMA Affinity' and 'GPU NUMA ID' are known",
            )
        trailing.append(name)
        offsets.append(cut + pos)
        pos += len(name)
    return tuple(trailing), tuple(offsets)


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
            raise ParseError(
                f"nvidia-smi topo -m row {label}",
                line.strip(),
                hint=f"more cells than the columns {', '.join(header.trailing) or '(none)'}",
            )
        return dict(zip(header.trailing, [*head, last], strict=False))
    if len(cells) > m:
        raise ParseError(
            f"nvidia-smi topo -m row {label}",
            line.strip(),
            hint=f"more cells than the columns {', '.join(header.trailing) or '(none)'}",
        )
    # space-aligned with empty cells: each value belongs to the column whose header starts nearest
    out: dict[str, str] = {}
    for cell, off in zip(cells, offsets, strict=True):
        best = min(range(m), key=lambda k: abs(header.trailing_at[k] - off))
        name = header.trailing[best]
        if name in out:
            raise ParseError(
                f"nvidia-smi topo -m row {label}",
                line.strip(),
                hint="cannot tell which affinity column each value belongs to",
            )
        out[name] = cell
    return out


def _affinity(value: str | None, what: str) -> frozenset[int] | None:
    if value is None or value in ("", "N/A"):
        return None
    return parse_cpu_list(value, what=what)


@dataclass(frozen=True)
class _Matrix:
    """The rows of the matrix as read: link cells and affinity cells per row label."""

    rows: dict[str, list[str]]
    affinity: dict[str, dict[str, str]]
    truncated: bool  # the last row was cut short
    end: int  # index of the first line after the matrix


def parse_topo_matrix(text: str, *, gpu_model: str | None = None) -> Topology:
    """Parse ``nvidia-smi topo -m`` (also ``-mp``) into a :class:`Topology`."""
    lines = _clean(text)
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines):
        raise ParseError(
            "nvidia-smi topo -m output", text, hint="the text is empty; capture `nvidia-smi topo -m`"
        )
    header = _parse_header(lines[i])
    matrix = _read_matrix(lines, i + 1, header)
    nic_legend, pcie_only_legend = _read_legends(lines, matrix.end)
    links = _links_of(header, matrix.rows)

    notes: list[str] = []
    missing = [d for d in header.devices if d not in matrix.rows]
    if matrix.truncated or missing:
        notes.append(_incomplete_note(missing, matrix.truncated))
        _warn(f"nvidia-smi topo -m: {notes[-1]}; parsed what is there")
    if any(lk.label == "SOC" for lk in links):
        notes.append("SOC (older drivers) read as SYS")
    if pcie_only_legend and not any(lk.is_nvlink for lk in links):
        notes.append(
            "the legend has no NV# line: this looks like `nvidia-smi topo -mp`, which shows PCIe paths "
            "only; NVLink, if the node has any, is not in it (capture `nvidia-smi topo -m`)"
        )

    gpus, nics = _devices_of(header, matrix.affinity, nic_legend, gpu_model)
    topo = Topology(
        gpus=gpus, nics=nics, links=links, complete=not (matrix.truncated or missing), notes=tuple(notes)
    )
    return topo.with_model(gpu_model)


def _read_matrix(lines: list[str], start: int, header: _Header) -> _Matrix:
    """The matrix rows from ``start`` up to the first blank line or ``Legend:``."""
    n = len(header.devices)
    i = start
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
            raise ParseError(
                "nvidia-smi topo -m row label",
                label,
                hint=f"rows must be named after the columns {' '.join(header.devices)}",
            )
        if label in rows:
            raise ParseError("nvidia-smi topo -m row", line.strip(), hint=f"row {label} appears twice")
        matrix = cells[1 : 1 + n]
        if len(matrix) < n or "" in matrix:
            if i == last_content:
                truncated = True
                rows[label] = [c for c in matrix if c]
                i += 1
                break
            raise ParseError(
                f"nvidia-smi topo -m row {label}",
                line.strip(),
                hint=f"expected {n} link cells, one per column",
            )
        rows[label] = matrix
        tail = _assign_trailing(header, cells[1 + n :], offsets[1 + n :], "\t" in line, label, line)
        if tail and not _GPU_RE.match(label):
            raise ParseError(
                f"nvidia-smi topo -m row {label}", line.strip(), hint="only GPU rows carry CPU/NUMA affinity"
            )
        affinity[label] = tail
        i += 1
    if not rows:
        raise ParseError(
            "nvidia-smi topo -m output",
            "\n".join(lines[: i + 1]),
            hint="no matrix rows follow the header; was the capture cut short?",
        )
    return _Matrix(rows, affinity, truncated, i)


def _read_legends(lines: list[str], start: int) -> tuple[dict[str, str], bool]:
    """The NIC legend (NIC0 -> mlx5_0) from the lines after the matrix, and whether a link legend without an NV#
    line was there (``topo -mp``: PCIe paths only); the link legend is otherwise only checked."""
    nic_legend: dict[str, str] = {}
    legend_entries: list[str] = []
    section = ""
    for raw in lines[start:]:
        s = raw.strip()
        if not s:
            continue
        if s in ("Legend:", "NIC Legend:"):
            section = s
            continue
        if section == "Legend:" and re.match(r"^\S+\s*=\s*\S.*$", s):
            legend_entries.append(s.split()[0])
            continue
        m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
        if section == "NIC Legend:" and m:
            nic_legend[m.group(1)] = m.group(2)
            continue
        raise ParseError(
            "nvidia-smi topo -m line",
            s,
            hint="after the matrix only the Legend and NIC Legend sections are expected",
        )
    return nic_legend, bool(legend_entries) and "NV#" not in legend_entries


def _links_of(header: _Header, rows: dict[str, list[str]]) -> tuple[Link, ...]:
    """One link per pair of devices; a pair shown twice must agree (the matrix is symmetric)."""
    links: dict[frozenset[str], Link] = {}
    p2p = sorted({c for m in rows.values() for c in m} & _P2P_STATUS.keys())
    if p2p:
        raise ParseError(
            "nvidia-smi topo -m cell",
            p2p[0],
            hint="this is `nvidia-smi topo -p2p` output; read it with parse_topo_p2p",
        )
    for label, matrix in rows.items():
        for col, token in zip(header.devices, matrix, strict=False):
            if col == label:
                if token != "X":
                    raise ParseError(
                        f"nvidia-smi topo -m cell {label}/{col}",
                        token,
                        hint="the diagonal of the matrix must be X",
                    )
                continue
            link = Link.from_token(label, col, token)
            if link.kind is LinkKind.SELF:
                raise ParseError(
                    f"nvidia-smi topo -m cell {label}/{col}",
                    token,
                    hint="X (self) may only appear on the diagonal",
                )
            key = frozenset((label, col))
            seen = links.get(key)
            if seen is not None and (seen.kind, seen.nvlinks) != (link.kind, link.nvlinks):
                raise ParseError(
                    f"nvidia-smi topo -m cells {label}/{col}",
                    f"{seen.label} vs {token}",
                    hint="the matrix is not symmetric; the capture looks damaged",
                )
            if seen is None:
                links[key] = link
    return tuple(links.values())


def _incomplete_note(missing: list[str], truncated: bool) -> str:
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    return (
        "capture is incomplete: "
        + (f"no rows for {shown}" if missing else "")
        + ("; " if missing and truncated else "")
        + ("last row cut short" if truncated else "")
    )


def _devices_of(
    header: _Header, affinity: dict[str, dict[str, str]], nic_legend: dict[str, str], gpu_model: str | None
) -> tuple[tuple[Gpu, ...], tuple[Nic, ...]]:
    """The GPUs (with their CPU/NUMA affinity) and NICs (named by the legend) of the header's columns."""
    gpus: list[Gpu] = []
    nics: list[Nic] = []
    for d in header.devices:
        gm = _GPU_RE.match(d)
        if gm:
            aff = affinity.get(d, {})
            gpus.append(
                Gpu(
                    index=int(gm.group(1)),
                    name=d,
                    cpu_affinity=_affinity(aff.get("CPU Affinity"), f"CPU affinity of {d}"),
                    numa_affinity=_affinity(aff.get("NUMA Affinity"), f"NUMA affinity of {d}"),
                    gpu_numa_id=_gpu_numa_id(aff.get("GPU NUMA ID"), d),
                    model=gpu_model,
                )
            )
        else:
            nics.append(Nic(d, nic_legend.get(d, d)))
    unknown = set(nic_legend) - {n.name for n in nics}
    if unknown:
        raise ParseError(
            "nvidia-smi topo -m NIC Legend",
            ", ".join(sorted(unknown)),
            hint="the legend names NICs that are not columns of the matrix",
        )
    return tuple(gpus), tuple(nics)


def _gpu_numa_id(value: str | None, device: str) -> int | None:
    if value in (None, "", "N/A"):
        return None
    if value is not None and value.isdigit():
        return int(value)
    raise ParseError(f"GPU NUMA ID of {device}", str(value), hint="expected a number or N/A")


_P2P_STATUS = {
    "OK": "supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
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
        out.update(_p2p_row(cells, cols, line))
    if not out:
        raise ParseError("nvidia-smi topo -p2p output", text, hint="no rows found")
    return out


def _p2p_row(cells: list[str], cols: list[str], line: str) -> dict[tuple[int, int], str]:
    if not _GPU_RE.match(cells[0]) or cells[0] not in cols or len(cells) != len(cols) + 1:
        raise ParseError(
            "nvidia-smi topo -p2p row", line.strip(), hint=f"expected a label and {len(cols)} cells"
        )
    a = int(cells[0][3:])
    row: dict[tuple[int, int], str] = {}
    for col, cell in zip(cols, cells[1:], strict=True):
        b = int(col[3:])
        if a == b:
            if cell != "X":
                raise ParseError(
                    f"nvidia-smi topo -p2p cell {cells[0]}/{col}", cell, hint="diagonal must be X"
                )
            continue
        if cell not in _P2P_STATUS:
            raise ParseError(
                f"nvidia-smi topo -p2p cell {cells[0]}/{col}",
                cell,
                hint=f"known codes: {', '.join(_P2P_STATUS)}",
            )
        row[(a, b)] = cell
    return row


def parse_topo_cpu(text: str) -> tuple[int, tuple[int, ...]]:
    """``nvidia-smi topo -c N``: (the CPU, the GPUs with affinity to it)."""
    lines = list(_nonblank_lines(text))
    m = re.match(r"^The GPUs that have an affinity with CPU (\d+) are:$", lines[0]) if lines else None
    if m is None:
        raise ParseError(
            "nvidia-smi topo -c output", text, hint="expected 'The GPUs that have an affinity ...'"
        )
    gpus: list[int] = []
    for ln in lines[1:]:
        for part in ln.split(","):
            part = part.strip()
            if not part.isdigit():
                raise ParseError("nvidia-smi topo -c GPU list", ln, hint="expected GPU indices like '6, 7'")
            gpus.append(int(part))
    return int(m.group(1)), tuple(gpus)
