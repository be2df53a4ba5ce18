"""``%slurm doctor [--job ID] [--node NAME] [--json]``: the doctor's report, as a table in the notebook.

The Slurm calls run in the kernel's thread, each with a short timeout (the doctor is a command a person asks
for and waits on, like ``%squeue``); the GPU-node step has its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.error import UsageError

from slurmlab.magics.args import job_id_option
from slurmlab.magics.session import user_errors
from slurmlab.slurm.doctor import doctor
from slurmlab.slurm.runner import get_runner

__all__ = ["DoctorJson", "doctor_magic"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel's process
        raise UsageError(f"%slurm doctor: {message}; use %slurm doctor [--job ID] [--node NAME] [--json]")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%slurm doctor", add_help=False, allow_abbrev=False)
    p.add_argument("--job", "-j")
    p.add_argument("--node", "-n")
    p.add_argument("--json", action="store_true")
    return p


class DoctorJson(str):
    """The report as JSON text that shows as-is (not as a quoted string)."""

    def __repr__(self) -> str:
        return str(self)


def doctor_magic(tokens: list[str]) -> Any:
    """The doctor's Report (``--json``: its JSON text) for the tokens after ``%slurm doctor``."""
    ns, extra = _parser().parse_known_args(tokens)
    if extra:
        raise UsageError(
            f"%slurm doctor does not take {' '.join(extra)!r}: use [--job ID] [--node NAME] [--json]"
        )
    job = job_id_option(ns.job, "--job") if ns.job is not None else None
    with user_errors("the doctor could not run"):
        report = doctor(get_runner(), job=job, node=ns.node)
    return DoctorJson(report.to_json()) if ns.json else report
