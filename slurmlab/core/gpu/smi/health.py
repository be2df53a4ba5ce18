"""Readers of what the doctor's GPU probe step printed: nvidia-smi's CSV queries, its header, and the step's view.

The probe (:mod:`slurmlab.slurm.doctor_gpu`) is one small shell script run as an overlapping step on the node. It
prints sections, each opened by ``@@slurmlab-gpu begin NAME`` and closed by ``@@slurmlab-gpu end NAME RC``; RC is
the exit status of the command, 124 or 137 when its ``timeout`` ended it (a hung nvidia-smi). A section that was
opened but never closed is one the whole step's timeout cut short: it counts as timed out too.

Rows are read strictly, one by one: a row that does not parse is kept as a problem (quoted), never dropped; values
nvidia-smi cannot give (``[N/A]``, ``[Not Supported]`` ...) become None. Input is bounded: more text or rows than a
node with many GPUs could print raises :class:`~slurmlab.errors.ParseError`, the only exception these readers raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.errors import ParseError

__all__ = [
    "MARK",
    "TIMED_OUT",
    "ComputeApp",
    "GpuProbe",
    "GpuRow",
    "Section",
    "parse_compute_apps",
    "parse_query_gpu",
    "parse_version",
    "read_probe",
    "split_sections",
]

MARK = "@@slurmlab-gpu"
TIMED_OUT = frozenset({124, 137})  # timeout(1)'s status when it ended the command (137: after -k's SIGKILL)
_MAX_TEXT = 1_000_000
_MAX_ROWS = 1024  # GPUs or compute processes on one node; far above any real node
_UNAVAILABLE = re.compile(
    r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|GPU is lost|"
    r"Requested functionality has been deprecated)\]?$",
    re.IGNORECASE,
)
_VERSION = re.compile(r"^\d{1,4}(\.\d{1,4}){0,3}$")
_QUERY_FIELDS = 12
T = TypeVar("T")
_SMI_SECTIONS = ("query-gpu", "compute-apps", "header")


@dataclass(frozen=True)
class Section:
    """One section of the probe's output: its lines and the exit status of its command (None: cut short)."""

    name: str
    lines: tuple[str, ...]
    rc: int | None

    @property
    def timed_out(self) -> bool:
        return self.rc is None or self.rc in TIMED_OUT

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _bounded(text: str, what: str) -> str:
    if len(text) > _MAX_TEXT:
        raise ParseError(
            what, text[:200] + " ...", hint=f"more than {_MAX_TEXT:,} characters: not nvidia-smi output"
        )
    return text


def split_sections(text: str) -> dict[str, Section]:
    """Section name -> section, from the probe step's stdout; lines outside every section are ignored."""
    _bounded(text, "the GPU probe's output")
    out: dict[str, Section] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if not line.startswith(MARK):
            if name is not None:
                lines.append(line)
            continue
        words = line[len(MARK) :].split()
        if len(words) >= 2 and words[0] == "begin":
            if name is not None:  # a section opened inside another: the first was cut short
                out[name] = Section(name, tuple(lines), None)
            name, lines = words[1], []
        elif len(words) == 3 and words[0] == "end" and words[1] == name:
            rc = int(words[2]) if words[2].lstrip("-").isdigit() and len(words[2]) < 6 else None
            out[name] = Section(name, tuple(lines), rc)
            name, lines = None, []
    if name is not None:
        out[name] = Section(name, tuple(lines), None)
    return out


def _value(cell: str) -> str | None:
    cell = cell.strip()
    return None if not cell or _UNAVAILABLE.match(cell) else cell


def _int(cell: str, what: str) -> int | None:
    v = _value(cell)
    if v is None:
        return None
    if not v.isdigit() or len(v) > 12:
        raise ValueError(f"{what} {cell.strip()!r} is not a number")
    return int(v)


def _bool(cell: str, what: str) -> bool | None:
    v = _value(cell)
    if v is None:
        return None
    if v.lower() not in ("enabled", "disabled"):
        raise ValueError(f"{what} {cell.strip()!r} is neither Enabled nor Disabled")
    return v.lower() == "enabled"


@dataclass(frozen=True)
class GpuRow:
    """One row of ``nvidia-smi --query-gpu=index,uuid,name,driver_version,pcie.link.gen.current,pcie.link.gen.max,
    pcie.link.width.current,pcie.link.width.max,memory.used,memory.total,utilization.gpu,persistence_mode``."""

    index: int
    uuid: str
    name: str
    driver: str | None
    gen: int | None
    gen_max: int | None
    width: int | None
    width_max: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization: int | None
    persistence: bool | None

    @property
    def label(self) -> str:
        return f"GPU{self.index}"


def _gpu_row(line: str) -> GpuRow:
    cells = line.split(",")
    if len(cells) != _QUERY_FIELDS:
        raise ValueError(f"{len(cells)} fields where {_QUERY_FIELDS} were asked for")
    index = _int(cells[0], "index")
    uuid, name = _value(cells[1]), _value(cells[2])
    if index is None or uuid is None or name is None:
        raise ValueError("no index, uuid or name")
    driver = _value(cells[3])
    if driver is not None and not _VERSION.match(driver):
        raise ValueError(f"driver version {driver!r} is not a version")
    return GpuRow(
        index,
        uuid,
        name,
        driver,
        _int(cells[4], "link generation"),
        _int(cells[5], "max generation"),
        _int(cells[6], "link width"),
        _int(cells[7], "max width"),
        _int(cells[8], "memory.used"),
        _int(cells[9], "memory.total"),
        _int(cells[10], "utilization"),
        _bool(cells[11], "persistence"),
    )


@dataclass(frozen=True)
class ComputeApp:
    """One row of ``nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory,process_name``."""

    gpu_uuid: str
    pid: int
    used_mib: int | None
    process: str


def _app_row(line: str) -> ComputeApp:
    cells = line.split(",", 3)  # a process name may hold commas: it is last
    if len(cells) != 4:
        raise ValueError(f"{len(cells)} fields where 4 were asked for")
    uuid, pid = _value(cells[0]), _int(cells[1], "pid")
    if uuid is None or pid is None:
        raise ValueError("no GPU uuid or pid")
    return ComputeApp(uuid, pid, _int(cells[2], "used_memory"), cells[3].strip()[:200] or "?")


def _rows(text: str, what: str, read: Callable[[str], T]) -> tuple[list[T], list[str]]:
    lines = [
        ln
        for ln in _bounded(text, what).splitlines()
        if ln.strip() and not ln.lstrip().startswith(STANDIN_MARK)
    ]
    if len(lines) > _MAX_ROWS:
        raise ParseError(what, lines[0][:200], hint=f"{len(lines)} rows: more than a node has ({_MAX_ROWS})")
    rows: list[T] = []
    problems: list[str] = []
    for n, line in enumerate(lines, 1):
        try:
            rows.append(read(line))
        except ValueError as exc:
            problems.append(f"{what} row {n} {line.strip()[:160]!r}: {exc}")
    return rows, problems


def parse_query_gpu(text: str) -> tuple[tuple[GpuRow, ...], tuple[str, ...]]:
    """The GPUs of a ``--query-gpu`` answer (``csv,noheader,nounits``) and the rows that did not parse."""
    rows, problems = _rows(text, "nvidia-smi --query-gpu", _gpu_row)
    return tuple(rows), tuple(problems)


def parse_compute_apps(text: str) -> tuple[tuple[ComputeApp, ...], tuple[str, ...]]:
    """The processes of a ``--query-compute-apps`` answer and the rows that did not parse."""
    rows, problems = _rows(text, "nvidia-smi --query-compute-apps", _app_row)
    return tuple(rows), tuple(problems)


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"12.4"`` -> (12, 4), ``"550.54.15"`` -> (550, 54, 15); None for anything else."""
    if text is None or not _VERSION.match(text.strip()):
        return None
    return tuple(int(p) for p in text.strip().split("."))


_HEADER = re.compile(r"Driver Version:\s*(\S+).*?CUDA Version:\s*(\S+)")


def _header(text: str) -> tuple[str | None, str | None]:
    """(driver version, the CUDA version the driver supports) from the plain ``nvidia-smi`` header."""
    for line in text.splitlines()[:40]:
        m = _HEADER.search(line)
        if m:
            return _value(m.group(1)), _value(m.group(2).rstrip("|"))
    return None, None


@dataclass(frozen=True)
class GpuProbe:
    """Everything the probe step saw, read; each reader's failure is kept in ``problems`` (quoted)."""

    sections: dict[str, Section]
    standin: bool
    gpus: tuple[GpuRow, ...] = ()
    apps: tuple[ComputeApp, ...] = ()
    problems: tuple[str, ...] = ()
    header_driver: str | None = None
    header_cuda: str | None = None
    runtime: str | None = None  # the CUDA runtime version the job's Python would use
    runtime_source: str = "not found"
    step_pids: frozenset[int] | None = None  # None: scontrol listpids did not answer
    env: dict[str, str] = field(default_factory=dict)
    devices: dict[str, bool] = field(default_factory=dict)  # /dev/nvidiaN -> the step could open it

    def section(self, name: str) -> Section | None:
        return self.sections.get(name)

    @property
    def driver(self) -> str | None:
        return next((g.driver for g in self.gpus if g.driver), None) or self.header_driver


def _key_values(section: Section | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in section.lines if section else ():
        key, sep, value = line.partition("=")
        if sep and key.replace("_", "").isalnum():
            out[key] = value.strip()[:500]
    return out


def _pids(section: Section | None) -> frozenset[int] | None:
    """The PIDs of ``scontrol listpids``'s table (PID first); None when it did not answer."""
    if section is None or section.rc != 0:
        return None
    pids = set()
    for line in section.lines:
        first = line.split()[0] if line.split() else ""
        if first.isdigit() and len(first) < 10:
            pids.add(int(first))
    return frozenset(pids)


def _runtime(section: Section | None) -> tuple[str | None, str]:
    """The ``cudart VERSION SOURCE`` line of the runtime probe, or why there is none."""
    for line in section.lines if section else ():
        words = line.split(None, 2)
        if len(words) == 3 and words[0] == "cudart" and parse_version(words[1]):
            return words[1], words[2][:200]
        if words[:1] == ["cudart"]:
            return None, line[len("cudart") :].strip()[:200] or "not found"
    if section is not None and section.timed_out:
        return None, "not found (the probe timed out)"
    return None, "not found"


def read_probe(text: str) -> GpuProbe:
    """What the probe step's stdout holds; the stand-in of a slurmlab sandbox is recognised by its mark."""
    sections = split_sections(text)
    env = _key_values(sections.get("env"))
    # the stand-in's own lines begin with its mark; a process name that holds the words does not make a sandbox
    standin = bool(env.get("SLURMLAB_SANDBOX")) or any(
        line.lstrip().startswith(STANDIN_MARK)
        for name in _SMI_SECTIONS
        if name in sections
        for line in sections[name].lines
    )
    problems: list[str] = []
    gpus: tuple[GpuRow, ...] = ()
    apps: tuple[ComputeApp, ...] = ()
    query, listing = sections.get("query-gpu"), sections.get("compute-apps")
    if query is not None and query.rc == 0:
        gpus, bad = parse_query_gpu(query.text)
        problems += bad
    if listing is not None and listing.rc == 0:
        apps, bad = parse_compute_apps(listing.text)
        problems += bad
    header = sections.get("header")
    driver, cuda = _header(header.text) if header is not None and header.rc == 0 else (None, None)
    runtime, source = _runtime(sections.get("cudart"))
    devices = {}
    for line in sections["devices"].lines if "devices" in sections else ():
        path, _, how = line.partition(" ")
        if path.startswith("/dev/nvidia") and how in ("open", "denied"):
            devices[path] = how == "open"
    return GpuProbe(
        sections,
        standin,
        gpus,
        apps,
        tuple(problems),
        driver,
        cuda,
        runtime,
        source,
        _pids(sections.get("pids")),
        env,
        devices,
    )
