"""What differs between Slurm versions in a request: options real Slurm had and dropped (``--uid``), and the
known bounds of a behaviour across versions (:class:`VersionBound`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.request.options import PASS_NO_VALUE, PASS_VALUE
from slurmlab.core.request.problems import Problem

__all__ = [
    "RETIRED_OPTIONS",
    "RetiredOption",
    "VersionBound",
    "pass_through_options",
    "retired_option_problem",
    "retired_option_warning",
    "version_text",
]


def version_text(version: Sequence[int]) -> str:
    """``(24, 11, 5)`` as Slurm writes it: ``24.11.5``; the month keeps its two digits (``22.05``)."""
    parts = [str(version[0])] + [f"{p:02d}" if n == 0 else str(p) for n, p in enumerate(version[1:])]
    return ".".join(parts)


@dataclass(frozen=True)
class VersionBound:
    """What is known of a behaviour across Slurm versions: seen accepted up to ``accepted_to`` and refused from
    ``refused_from`` on. Versions in between were not tried, so they answer None (unknown), as does no version."""

    accepted_to: tuple[int, int]
    refused_from: tuple[int, int]

    def refuses(self, version: Sequence[int] | None) -> bool | None:
        if not version:
            return None
        v = tuple(version[:2])
        if v >= self.refused_from:
            return True
        if v <= self.accepted_to:
            return False
        return None

    def since(self) -> str:
        return f"Slurm {version_text(self.refused_from)} and later"


@dataclass(frozen=True)
class RetiredOption:
    """A salloc/srun option real Slurm had and dropped: passed through only where the Slurm in use has it."""

    flag: str
    bound: VersionBound
    fix: str


# Seen on real Slurm: 22.05's salloc and srun take --uid/--gid (root only); 24.11's and 26.05's answer
# "unrecognized option" (sbatch keeps them, but slurmlab's requests are salloc/srun lines).
RETIRED_OPTIONS: dict[str, RetiredOption] = {
    "--uid": RetiredOption(
        "--uid",
        VersionBound((22, 5), (24, 11)),
        "Slurm runs a job as whoever submits it: submit as that user instead "
        "(e.g. `sudo -u USER salloc …`), or drop --uid",
    ),
    "--gid": RetiredOption(
        "--gid",
        VersionBound((22, 5), (24, 11)),
        "drop --gid: the job runs with the submitting user's groups (to charge a project, use --account)",
    ),
}


def pass_through_options(version: Sequence[int] | None = None) -> frozenset[str]:
    """Real salloc/srun options slurmlab passes to ``version``'s Slurm unchanged and without a warning."""
    kept = {flag for flag, r in RETIRED_OPTIONS.items() if r.bound.refuses(version) is False}
    return frozenset(PASS_NO_VALUE | PASS_VALUE | kept)


def retired_option_problem(group: Sequence[str], version: Sequence[int] | None) -> Problem | None:
    """The Problem of a retired option (its tokens ``group``) that ``version``'s Slurm refuses, else None."""
    retired = RETIRED_OPTIONS.get(group[0].partition("=")[0]) if group else None
    if retired is None or not retired.bound.refuses(version):
        return None
    assert version  # refuses() is True only for a known version
    return Problem(
        f"{' '.join(group)}: salloc and srun of Slurm {version_text(version)} have no {retired.flag} option "
        f'(they answer "unrecognized option")',
        retired.fix,
    )


def retired_option_warning(group: Sequence[str], version: Sequence[int] | None) -> str | None:
    """A warning for a retired option where it is not known whether ``version``'s Slurm still takes it."""
    retired = RETIRED_OPTIONS.get(group[0].partition("=")[0]) if group else None
    if retired is None or retired.bound.refuses(version) is not None:
        return None
    which = f"Slurm {version_text(version)}" if version else "this cluster's Slurm (version unknown)"
    return (
        f"{' '.join(group)} passed to Slurm unchanged: {retired.bound.since()} refuse {retired.flag} "
        f'("unrecognized option") and slurmlab cannot tell whether {which} still takes it'
    )
