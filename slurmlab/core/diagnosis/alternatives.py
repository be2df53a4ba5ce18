"""What change would let a pending job start sooner, as pure logic: the job's own request rebuilt as options,
the variants of it worth asking Slurm about (fewer GPUs, another GPU type, another partition, a shorter time),
and Slurm's answer to ``sbatch --test-only`` read back.

The variants are built from the job's record, never from what its owner typed, so the doctor can ask about
anyone's job. ``sbatch --test-only`` answers on stderr (22.05, 24.11, 26.05) with
``sbatch: Job 4 to start at 2026-12-01T08:16:18 using 1 processors on nodes node2 in partition gpu``; a
refusal ends with a non-zero exit and Slurm's reason, which is kept word for word.

``--test-only`` applies no QOS or association limit: each variant also carries what it changes (GPUs, type,
time, partition, QOS, account), so that :mod:`.limit_rules` can check it against them; one a limit would hold
is kept as such (:attr:`Alternative.held_by`), never offered as sooner.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import Job, Node, Partition
from slurmlab.core.slurm.timefmt import parse_timestamp
from slurmlab.errors import ParseError

__all__ = [
    "NO_ALTERNATIVES",
    "Alternative",
    "StartEstimate",
    "Variant",
    "base_options",
    "changed_options",
    "gpu_option",
    "gpu_request",
    "kept_options",
    "MAX_VARIANTS",
    "parse_test_only",
    "rank",
    "variants",
]

# pending reasons no other request cures: the job waits on something else than resources
NO_ALTERNATIVES = ("Dependency", "BeginTime", "DependencyNeverSatisfied", "JobHeld")

# 26.05.5 prints a stray word after the time ("… at 2026-12-01T08:40:12 a using 1 processors …"): skip any
_WILL_START = re.compile(
    r"Job\s+\d+\s+to\s+start\s+at\s+(?P<when>\S+)(?:\s+\S+)*?\s+using\s+(?P<cpus>\d+)\s+"
    r"processors?\s+on\s+nodes?\s+(?P<nodes>\S+)(?:\s+in\s+partition\s+(?P<part>\S+))?"
)
# the order in which equally good alternatives are listed: the smallest change to the request first
_KINDS = ("time", "gpus", "type", "partition", "qos", "account")
MAX_VARIANTS = 10


@dataclass(frozen=True)
class Variant:
    """One change to the job's request: ``options`` are sbatch/salloc options for the whole changed request."""

    kind: str  # gpus / type / partition / time / qos / account
    change: str  # "2 GPUs instead of 8"
    options: tuple[str, ...]
    # what it changes (None: as the job asked); the limits are checked on these, --test-only on the options
    gpus: int | None = None  # the count in the job's own GPU option (--gpus, --gpus-per-node …)
    gpu_type: str | None = None
    minutes: int | None = None
    partition: str | None = None
    qos: str | None = None
    account: str | None = None

    @property
    def salloc_line(self) -> str:
        return "%salloc " + " ".join(shlex.quote(o) for o in self.options)


@dataclass(frozen=True)
class StartEstimate:
    """Slurm's answer to ``sbatch --test-only``: when and where it would start, or why it refused."""

    starts: datetime | None = None
    nodes: str = ""
    partition: str = ""
    refused: str = ""  # Slurm's own words when it refused (or why the answer could not be had)
    unreadable: bool = False  # ``refused`` says why Slurm's answer could not be read, not a refusal


@dataclass(frozen=True)
class Alternative:
    """One variant with Slurm's answer. ``held_by``: the limits that would hold it once submitted (then it was
    not asked of ``--test-only``, which applies none of them, and is never offered)."""

    variant: Variant
    answer: StartEstimate
    held_by: tuple[str, ...] = ()

    @property
    def offered(self) -> bool:
        return not self.held_by and self.answer.starts is not None and not self.answer.refused

    def line(self, *, offer: bool = True) -> str:
        """What Slurm said of it, with the full date and time of its start; ``offer``: with the line that
        takes it (only for a change that starts sooner)."""
        a = self.answer
        if self.held_by:
            more = f" (and {len(self.held_by) - 1} more)" if len(self.held_by) > 1 else ""
            return f"{self.variant.change}: not offered: {self.held_by[0]}{more}"
        if a.refused:
            return (
                f"{self.variant.change}: {'no answer' if a.unreadable else 'refused by Slurm'}: {a.refused}"
            )
        when = a.starts.strftime("%Y-%m-%d %H:%M:%S") if a.starts else "?"
        where = f" on {a.nodes}" + (f" in {a.partition}" if a.partition else "")
        take = f"  ->  {self.variant.salloc_line}" if offer else ""
        return f"{self.variant.change}: would start {when}{where}{take}"


def parse_test_only(output: str, returncode: int, tz: tzinfo | None = None) -> StartEstimate:
    """Read what ``sbatch --test-only`` printed (stdout and stderr together). A refusal (non-zero exit) keeps
    Slurm's words; an answer that says neither raises ParseError quoting it."""
    m = _WILL_START.search(output)
    if m is not None and returncode == 0:
        return StartEstimate(parse_timestamp(m["when"], tz), m["nodes"], m["part"] or "")
    words = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if returncode != 0:
        said = "; ".join(w.removeprefix("sbatch: error: ").removeprefix("sbatch: ") for w in words)
        return StartEstimate(refused=(said[:300] or f"exit code {returncode}, no message"))
    raise ParseError(
        "sbatch --test-only answer",
        output,
        hint="expected 'Job N to start at TIME using N "
        "processors on nodes NODES'; run the command by hand to see what this Slurm prints",
    )


def gpu_request(job: Job) -> tuple[str, GresItem] | None:
    """The job's one GPU request as (sbatch option, item); None when it asks no GPU or several kinds."""
    found = [
        (opt, g)
        for opt, items in (
            ("--gpus", job.tres_per_job),
            ("--gpus-per-node", job.tres_per_node),
            ("--gpus-per-task", job.tres_per_task),
        )
        for g in items
        if g.name == "gpu"
    ]
    return found[0] if len(found) == 1 else None


def gpu_option(option: str, gpu_type: str | None, count: int) -> str:
    return f"{option}={gpu_type + ':' if gpu_type else ''}{count}"


def _minutes(seconds: int) -> str:
    return str(max(1, math.ceil(seconds / 60)))


def base_options(
    job: Job, *, partition: str | None = None, gpus: str | None = None, minutes: str | None = None
) -> list[str]:
    """The job's request as sbatch/salloc options (partition, nodes, tasks, CPUs per task, memory per node,
    GPUs, time), with one part replaced where given."""
    out: list[str] = []
    part = partition or job.partition
    if part:
        out += ["-p", part]
    if job.num_nodes:
        out += ["-N", str(job.num_nodes)]
    tasks = job.num_tasks or 1
    if tasks > 1:
        out += ["-n", str(tasks)]
    if job.num_cpus and job.num_cpus > tasks and job.num_cpus % tasks == 0:
        out += ["-c", str(job.num_cpus // tasks)]
    mem = job.tres_req.mem_mb if job.tres_req else None
    if mem:
        out.append(f"--mem={max(1, mem // (job.num_nodes or 1))}M")
    asked = gpu_request(job)
    if gpus is not None:
        out.append(gpus)
    elif asked is not None:
        out.append(gpu_option(asked[0], asked[1].type, asked[1].amount))
    time = minutes or (_minutes(job.time_limit) if job.time_limit else None)
    if time:
        out += ["-t", time]
    return out


def changed_options(
    job: Job,
    *,
    partition: str | None = None,
    gpus: int | None = None,
    gpu_type: str | None = None,
    minutes: int | None = None,
) -> list[str]:
    """The job's request with the given parts changed (``alloc.resubmit(gpus=2)``); the GPU option keeps the
    job's own form (--gpus, --gpus-per-node …), and its type unless ``gpu_type`` replaces it."""
    gpu = None
    if gpus is not None or gpu_type is not None:
        asked = gpu_request(job)
        option, item = asked if asked is not None else ("--gpus", None)
        count = gpus if gpus is not None else (item.amount if item is not None else 1)
        gpu = gpu_option(option, gpu_type or (item.type if item is not None else None), count)
    return base_options(job, partition=partition, gpus=gpu, minutes=str(minutes) if minutes else None)


# options of the user's own request that no variant changes and that a job record cannot give back: carried over
# as typed when the request is switched. Each takes a value, but --exclusive, which may go without one.
_KEPT_LONG = (
    "--signal",
    "--gpu-bind",
    "--gres-flags",
    "--account",
    "--qos",
    "--constraint",
    "--mail-type",
    "--mail-user",
    "--exclusive",
    "--reservation",
    "--licenses",
)
_KEPT_SHORT = {"-A": "--account", "-q": "--qos", "-C": "--constraint", "-L": "--licenses"}
_FLAG_ALONE = ("--exclusive",)


def kept_options(request: Sequence[str], replaced: Sequence[str] = ()) -> list[str]:
    """The options of ``request`` (salloc's, as given) that :func:`base_options` cannot rebuild from the job's
    record (``--signal``, ``--gpu-bind``, ``--gres-flags``, account, QOS, constraint, mail, ``--exclusive``
    ...), in their order, each with its value; but those ``replaced`` names (``--qos``, ``--account``: set by
    the variant itself, and the last one given would win)."""
    out: list[str] = []
    items = [str(t) for t in request]
    i = 0
    while i < len(items):
        token = items[i]
        name, eq, _ = token.partition("=")
        joined = name[:2] in _KEPT_SHORT and len(name) > 2 and not name.startswith("--")  # -Aproj
        long = _KEPT_SHORT.get(name[:2], name) if not name.startswith("--") else name
        if long in _KEPT_LONG and long in replaced:
            i += 1 if eq or joined or long in _FLAG_ALONE else 2
            continue
        if long in _KEPT_LONG:
            if eq or joined or long in _FLAG_ALONE:
                out.append(token)
            elif i + 1 < len(items):
                out += [token, items[i + 1]]
                i += 1
        i += 1
    return out


def _fewer(count: int) -> list[int]:
    out: list[int] = []
    n = count // 2
    while n >= 1 and len(out) < 3:
        out.append(n)
        n //= 2
    return out


def _usable(nodes: Sequence[Node], partition: Partition) -> list[Node]:
    names = set(partition.nodes)
    return [n for n in nodes if n.name in names or partition.name in n.partitions]


def variants(job: Job, nodes: Sequence[Node], partitions: Sequence[Partition]) -> list[Variant]:
    """The changes worth asking ``sbatch --test-only`` about, at most :data:`MAX_VARIANTS`."""
    out: list[Variant] = []
    if job.time_limit and job.time_limit > 60:
        for part in (2, 4):
            shorter = job.time_limit // part
            if shorter >= 60:
                out.append(
                    Variant(
                        "time",
                        f"-t {_minutes(shorter)} (minutes) instead of {_minutes(job.time_limit)}",
                        tuple(base_options(job, minutes=_minutes(shorter))),
                        minutes=int(_minutes(shorter)),
                    )
                )
    asked = gpu_request(job)
    if asked is not None:
        option, item = asked
        for n in _fewer(item.amount):
            out.append(
                Variant(
                    "gpus",
                    f"{n} GPU(s) ({option}) instead of {item.amount}",
                    tuple(base_options(job, gpus=gpu_option(option, item.type, n))),
                    gpus=n,
                )
            )
        mine = set((job.partition or "").split(","))
        here = [n for p in partitions if p.name in mine for n in _usable(nodes, p)] or list(nodes)
        types = sorted({t for n in here for t in n.gpu_types() if t} - {item.type or ""})
        for t in types if item.type else ():
            out.append(
                Variant(
                    "type",
                    f"GPU type {t} instead of {item.type}",
                    tuple(base_options(job, gpus=gpu_option(option, t, item.amount))),
                    gpu_type=t,
                )
            )
        for p in partitions:
            if p.name not in mine and any(n.gpu_total for n in _usable(nodes, p)):
                out.append(
                    Variant(
                        "partition",
                        f"partition {p.name} instead of {job.partition}",
                        tuple(base_options(job, partition=p.name)),
                        partition=p.name,
                    )
                )
    return out[:MAX_VARIANTS]


def rank(
    found: Sequence[Alternative], expected: datetime | None
) -> tuple[list[Alternative], list[Alternative]]:
    """(those offered that start before ``expected``, best first; the rest: later, refused, held by a limit or
    unknown). ``expected`` None: the job never starts as it is, so every start counts as sooner."""
    sooner: list[Alternative] = []
    rest: list[Alternative] = []
    for alt in found:
        s = alt.answer.starts
        if alt.offered and s is not None and (expected is None or s < expected):
            sooner.append(alt)
        else:
            rest.append(alt)
    sooner.sort(
        key=lambda a: (
            a.answer.starts.timestamp() if a.answer.starts else math.inf,
            _KINDS.index(a.variant.kind),
        )
    )
    return sooner, rest
