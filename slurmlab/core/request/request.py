"""A GPU request read from salloc/srun-style tokens, and rendered back to argv.

The caller splits the line (IPython's ``arg_split`` or :func:`shlex.split`); this module never splits a
command line itself. It only splits option *values* whose grammar has separators (``--gres=a,b``).

    req = parse_request(["-N", "2", "--gpus-per-node=h100:4", "--gpu-bind=closest"])
    req.to_argv()  # ['--nodes=2', '--gpus-per-node=h100:4', '--gpu-bind=closest']

Every malformed value is reported (all of them, in one :class:`RequestProblems`) instead of being dropped.
Options slurmlab does not model are kept in order in ``extra`` and rendered back unchanged; unknown ones add a
line to ``warnings``.

The request is built from parts, each in its own module: the option values (:mod:`.values`) and their readers
(:mod:`.value_parsers`), the option table (:mod:`.options`), what differs between Slurm versions
(:mod:`.option_versions`) and the problems (:mod:`.problems`). Their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from slurmlab.core.request.option_versions import (
    RETIRED_OPTIONS,
    RetiredOption,
    VersionBound,
    pass_through_options,
    retired_option_problem,
    retired_option_warning,
    version_text,
)
from slurmlab.core.request.options import (
    BY_LONG,
    BY_SHORT,
    OPTIONS,
    PASS_NO_VALUE,
    PASS_VALUE,
    Option,
    is_option,
)
from slurmlab.core.request.problems import BadValue, Problem, RequestProblems, raise_problems
from slurmlab.core.request.values import (
    GPU_BIND_KINDS,
    GRES_FLAGS,
    GpuBind,
    GpuCount,
    GresSpec,
    Memory,
    NodeCount,
    TimeLimit,
)
from slurmlab.errors import RequestError

__all__ = [
    "GPU_BIND_KINDS",
    "GRES_FLAGS",
    "Checked",
    "GpuBind",
    "GpuCount",
    "GpuRequest",
    "GresSpec",
    "Memory",
    "NodeCount",
    "Problem",
    "RETIRED_OPTIONS",
    "RequestProblems",
    "RetiredOption",
    "TimeLimit",
    "VersionBound",
    "parse_request",
    "pass_through_options",
    "raise_problems",
    "retired_option_problem",
    "retired_option_warning",
    "version_text",
]


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Checked:
    """What :func:`slurmlab.core.request.pipeline.check_request` checked a request against.

    ``argv`` is the request as it was checked: a copy changed since (``dataclasses.replace``) renders another
    argv and so counts as unchecked. ``partitions`` is the cluster's partition count, None when the request was
    checked on its own (``why_not`` then says why the cluster was not asked)."""

    argv: tuple[str, ...]
    partitions: int | None = None
    version: tuple[int, ...] | None = None
    why_not: str = ""

    @property
    def against_cluster(self) -> bool:
        return self.partitions is not None

    def note(self) -> str:
        """In words, for a dry run: ``checked against the cluster (3 partitions), Slurm 24.11.5``."""
        if self.partitions is None:
            return f"not checked against the cluster: {self.why_not or 'no cluster inventory was given'}"
        count = "1 partition" if self.partitions == 1 else f"{self.partitions} partitions"
        note = f"checked against the cluster ({count})"
        return note + (f", Slurm {version_text(self.version)}" if self.version else "")


@dataclass(frozen=True)
class GpuRequest:
    """What a user asks Slurm for; every field None/empty means "not given" (Slurm's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    job_name: str | None = None
    time: TimeLimit | None = None
    nodes: NodeCount | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    gpus: GpuCount | None = None
    gpus_per_node: GpuCount | None = None
    gpus_per_task: GpuCount | None = None
    gpus_per_socket: GpuCount | None = None
    gres: tuple[GresSpec, ...] = ()
    gres_flags: tuple[str, ...] = ()
    gpu_bind: GpuBind | None = None
    cpu_bind: str | None = None
    cpus_per_gpu: int | None = None
    mem: Memory | None = None
    mem_per_gpu: Memory | None = None
    mem_per_cpu: Memory | None = None
    gpu_freq: str | None = None
    mpi: str | None = None
    exclusive: str | None = None  # "" for plain --exclusive
    nodelist: str | None = None
    exclude: str | None = None
    constraint: str | None = None
    comment: str | None = None
    extra: tuple[tuple[str, ...], ...] = ()  # options slurmlab does not model, in order, each as its tokens
    command: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)
    # set only by the one pipeline (core.request.pipeline.check_request); None: never checked
    checked: Checked | None = field(default=None, compare=False)

    @classmethod
    def parse(cls, tokens: Sequence[str]) -> GpuRequest:
        return parse_request(tokens)

    def to_argv(self) -> list[str]:
        """Canonical long-form argv: known options first, then ``extra`` in order, then ``-- command``."""
        argv: list[str] = []
        for opt in OPTIONS:
            value = getattr(self, opt.field)
            if value is None or (isinstance(value, tuple) and not value):
                continue
            if opt.optional_value and value == "":
                argv.append(f"--{opt.long}")
            else:
                argv.append(f"--{opt.long}={opt.render(value)}")
        for group in self.extra:
            argv.extend(group)
        if self.command:
            argv.append("--")
            argv.extend(self.command)
        return argv

    # ---- derived views used by validation and explanations

    @property
    def gpu_gres(self) -> tuple[GresSpec, ...]:
        return tuple(s for s in self.gres if s.is_gpu)

    @property
    def shared_gres(self) -> tuple[GresSpec, ...]:
        return tuple(s for s in self.gres if s.is_shared)

    @property
    def gpu_options(self) -> tuple[tuple[str, GpuCount], ...]:
        """Every ``--gpus*`` option given, as (option, count)."""
        pairs = (
            ("--gpus", self.gpus),
            ("--gpus-per-node", self.gpus_per_node),
            ("--gpus-per-task", self.gpus_per_task),
            ("--gpus-per-socket", self.gpus_per_socket),
        )
        return tuple((name, c) for name, c in pairs if c is not None)

    @property
    def wants_gpus(self) -> bool:
        """Whole GPUs (or MIG slices) requested with a count above zero."""
        return any(c.count for _, c in self.gpu_options) or any(s.amount for s in self.gpu_gres)

    @property
    def wants_shared_gpu(self) -> bool:
        return any(s.amount for s in self.shared_gres)


def parse_request(tokens: Sequence[str], *, version: Sequence[int] | None = None) -> GpuRequest:
    """Read salloc/srun options from already-split tokens.

    Raises :class:`RequestProblems` (a RequestError) listing every malformed value. Repeated options: the last
    wins, as in Slurm, with a warning. Tokens after ``--`` or after the first non-option are the ``command``.
    With the Slurm ``version`` known, an option that Slurm no longer has (``--uid``) is one of the problems;
    without it, such an option is kept in ``extra`` for :func:`slurmlab.core.request.validate.validate` to judge.
    """
    if isinstance(tokens, str):
        raise RequestError(
            "parse_request takes a list of tokens, not a string",
            hint="split the line first, e.g. IPython's arg_split(line) or shlex.split(line)",
        )
    values: dict[str, object] = {}
    seen: dict[str, str] = {}
    extra: list[tuple[str, ...]] = []
    command: tuple[str, ...] = ()
    problems: list[Problem] = []
    warnings: list[str] = []
    toks = list(tokens)
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok == "--":
            command = tuple(toks[i + 1 :])
            break
        if not is_option(tok):
            command = tuple(toks[i:])
            break
        opt: Option | None
        value: str | None
        if tok.startswith("--"):
            name, eq, attached = tok[2:].partition("=")
            opt = BY_LONG.get(name)
            flag = f"--{name}"
            value = attached if eq else None
        else:
            opt = BY_SHORT.get(tok[1])
            flag = tok[:2]
            value = tok[2:] or None
        if opt is None:
            group, i = _pass_through(toks, i, flag, value, warnings)
            retired = retired_option_problem(group, version)
            if retired is not None:
                problems.append(retired)
            else:
                extra.append(group)
            continue
        if value is None and not opt.optional_value:
            if i + 1 >= len(toks):
                how = (
                    f"{flag}=VALUE or {flag} VALUE"
                    if flag.startswith("--")
                    else f"{flag} VALUE or {flag}VALUE"
                )
                problems.append(Problem(f"{flag} needs a value", f"write {how}"))
                break
            value = toks[i + 1]
            i += 1
        i += 1
        try:
            parsed = opt.parse("" if value is None else value)
        except BadValue as bad:
            problems.append(Problem(bad.message, bad.hint))
            continue
        if opt.field in seen:
            warnings.append(f"--{opt.long} given more than once; the last one ({value!r}) wins, as in Slurm")
        seen[opt.field] = flag
        values[opt.field] = parsed
    raise_problems(problems)
    # each value is what the parser OPTIONS pairs with its field returned: mypy cannot follow that pairing
    return GpuRequest(**values, extra=tuple(extra), command=command, warnings=tuple(warnings))  # type: ignore[arg-type]


def _pass_through(
    toks: list[str], i: int, flag: str, value: str | None, warnings: list[str]
) -> tuple[tuple[str, ...], int]:
    tok = toks[i]
    if value is not None or flag in PASS_NO_VALUE:
        if flag not in PASS_NO_VALUE and flag not in PASS_VALUE and flag not in RETIRED_OPTIONS:
            warnings.append(f"unknown option {tok!r} passed to Slurm unchanged; slurmlab did not check it")
        return (tok,), i + 1
    takes_next = i + 1 < len(toks) and not is_option(toks[i + 1]) and toks[i + 1] != "--"
    if flag in PASS_VALUE or flag in RETIRED_OPTIONS:
        return (tuple(toks[i : i + 2]) if takes_next else (tok,)), i + (2 if takes_next else 1)
    if takes_next:
        warnings.append(
            f"unknown option {tok!r} passed to Slurm unchanged with {toks[i + 1]!r} taken as its value; "
            "slurmlab did not check it (write --opt=value to make this explicit)"
        )
        return (tok, toks[i + 1]), i + 2
    warnings.append(f"unknown option {tok!r} passed to Slurm unchanged; slurmlab did not check it")
    return (tok,), i + 1
