"""What the doctor asks Slurm beyond the shared queries: the controller's ping, the GRES types the cluster
declares (``scontrol show config``) and one job's steps. Each an argv list through the runner, with a short
timeout, read by the existing parsers."""

from __future__ import annotations

from slurmlab.core.diagnosis.cluster_checks import parse_reasons
from slurmlab.core.diagnosis.job_checks import PlannedStart, parse_planned_start
from slurmlab.core.slurm.detect import detect_and_parse
from slurmlab.core.slurm.models import Step
from slurmlab.core.slurm.parse_json import parse_steps_json
from slurmlab.core.slurm.parse_text import parse_scontrol_steps
from slurmlab.errors import ParseError
from slurmlab.slurm.controller import SCONTROL_JSON_SINCE, slurm_version
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.query import read_json
from slurmlab.slurm.runner import Runner, RunResult

__all__ = ["CHECK_TIMEOUT", "gres_types", "job_steps", "node_reasons", "ping_text", "planned_start"]

# every doctor call answers in milliseconds on a healthy cluster; a sick one must not hold the doctor long
CHECK_TIMEOUT = 10.0


def _limit(runner: Runner) -> float:
    return min(runner.timeout, CHECK_TIMEOUT)


def ping_text(runner: Runner) -> RunResult:
    """``scontrol ping`` as it came back (its exit code is 1 when a controller is down: not an error here)."""
    return runner.run(["scontrol", "ping"], check=False, timeout=_limit(runner))


def gres_types(runner: Runner) -> list[str]:
    """The GRES names ``GresTypes`` of ``scontrol show config`` declares (empty when it declares none)."""
    result = runner.run(["scontrol", "show", "config"], timeout=_limit(runner))
    parsed = detect_and_parse(result.stdout)
    if parsed.kind != "config":
        raise ParseError(
            "scontrol show config", result.stdout[:400], hint="expected 'Configuration data as of …'"
        )
    for row in parsed.items:
        cells: tuple[object, ...] = tuple(getattr(row, "cells", ()))
        if len(cells) == 2 and cells[0] == "GresTypes":
            value = str(cells[1]).strip()
            return [] if value in ("(null)", "") else [t.strip() for t in value.split(",") if t.strip()]
    return []


def job_steps(job_id: str, runner: Runner) -> list[Step]:
    """The steps of one job (none is an answer: a job between steps has none)."""
    json_form = slurm_version(runner) >= SCONTROL_JSON_SINCE
    argv = ["scontrol", *(["--json"] if json_form else []), "show", "step", job_id]
    result = runner.run(argv, check=False, timeout=_limit(runner))
    said = (result.stdout + result.stderr).lower()
    # 22.05 says "Job step 46. not found" for a running job between steps (the step id left empty)
    between_steps = "job step" in said and "not found" in said
    if "no job steps" in said or between_steps or ("invalid job id" in said and result.returncode != 0):
        return []
    if result.returncode != 0:
        raise classify_failure(argv, result.returncode, result.stderr or result.stdout)
    if json_form:
        return parse_steps_json(read_json(result), problems=[])
    return parse_scontrol_steps(result.stdout, problems=[])


def node_reasons(runner: Runner) -> dict[str, tuple[str, str, str]]:
    """node -> (reason, who set it, when) of every node with a reason (``sinfo -R``: the same text on every
    version, where the JSON node records of 23.02+ keep who and when in fields the node model does not hold)."""
    result = runner.run(["sinfo", "-R", "-N", "-h", "-o", "%N|%u|%H|%E"], timeout=_limit(runner))
    return parse_reasons(result.stdout)


def planned_start(job_id: str, runner: Runner) -> PlannedStart:
    """When and where the scheduler plans to start a pending job (``squeue --start``; the backfill scheduler
    fills it in on its next pass, so unknown is a normal answer)."""
    result = runner.run(["squeue", "--start", "-h", "-j", job_id, "-o", "%S|%Y"], timeout=_limit(runner))
    return parse_planned_start(result.stdout)
