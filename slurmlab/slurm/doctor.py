"""``slurmlab doctor``: the field guide's troubleshooting as checks, run against the cluster the runner talks to.

Order: the controller first (every later check SKIPs with "controller down" when it does not answer); the GRES
configuration; with ``job``, why it is pending (held, its begin time, the QOS/association limit that holds it
and which change lifts it, blockers, changes ``sbatch --test-only`` says would start it sooner and no limit would
hold: :func:`slurmlab.slurm.pending_alternatives.pending_checks`, as ``alloc.why()`` has them) or how it runs
(its nodes, steps, time left, then the GPU-node checks of :mod:`slurmlab.slurm.doctor_gpu`); the drained or down
nodes (``node``, those of the job's partition, or the whole cluster's). Every Slurm call goes through the runner
with a timeout; the judgement is pure (:mod:`slurmlab.core.diagnosis`). An ordinary user gets every check; fixes
only admins can apply say so.

API::

    doctor(runner=None, *, job=None, node=None, gpu_timeout=30.0) -> Report
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import partial

from slurmlab.core.diagnosis.cluster_checks import (
    judge_config,
    judge_controller,
    judge_munge,
    judge_node,
    judge_nodes,
    skipped_for_controller,
    unhealthy,
)
from slurmlab.core.diagnosis.findings import Finding, Report, Verdict
from slurmlab.core.diagnosis.findings import guarded as _guarded_by
from slurmlab.core.diagnosis.job_checks import (
    judge_ended,
    judge_held,
    judge_pending,
    judge_running,
    usable_nodes,
)
from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.models import Job, Node, Partition
from slurmlab.core.slurm.states import HOLDING
from slurmlab.errors import MungeError, SlurmError, SlurmlabError
from slurmlab.slurm.doctor_evidence import gres_types, job_steps, node_reasons, ping_text, planned_start
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.job_queries import job_detail
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.pending_alternatives import pending_checks
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["doctor"]


# a check Slurm failed on the way is one FAIL that says so (the others still run)
_guarded = partial(_guarded_by, fix="run the doctor again; if it recurs, run the failing command by hand")


def _controller(runner: Runner) -> Finding:
    try:
        result = ping_text(runner)
    except MungeError as exc:
        return judge_munge(exc.message, exc.hint or "")
    except SlurmError as exc:
        return judge_controller("", error=exc.message + (f" ({exc.hint})" if exc.hint else ""))
    if result.returncode != 0 and result.stderr.strip():
        failure = classify_failure(result.argv, result.returncode, result.stderr)
        if isinstance(failure, MungeError):
            return judge_munge(failure.message, failure.hint or "")
    return judge_controller(result.stdout + "\n" + result.stderr)


def _gpu_findings(runner: Runner, job: Job, node: str | None, timeout: float) -> list[Finding]:
    try:
        from slurmlab.slurm.doctor_gpu import gpu_checks
    except ImportError:  # the GPU-node checks are optional: the Slurm side stands alone
        return []
    return gpu_checks(runner, str(job.job_id), node if node in job.nodes else None, timeout=timeout)


def _pending(
    runner: Runner, job: Job, nodes: list[Node], partitions: list[Partition], now: datetime
) -> list[Finding]:
    if job.held:
        return [judge_held(job)]
    try:
        planned = planned_start(str(job.job_id), runner)
    except SlurmlabError:
        planned = None  # the job record's StartTime still says when
    # the same limit, blockers and alternatives as alloc.why()
    checks = pending_checks(
        job,
        runner,
        nodes=nodes,
        partitions=partitions,
        now=now,
        failed=Verdict.FAIL,
        fix="run the doctor again; if it recurs, run the failing command by hand",
    )
    return [judge_pending(job, now, planned), *checks.findings]


def _job_findings(
    runner: Runner,
    jid: str,
    node: str | None,
    nodes: list[Node],
    partitions: list[Partition],
    gpu_timeout: float,
) -> tuple[list[Finding], Job | None]:
    now = datetime.now(timezone.utc)
    try:
        job = job_detail(jid, runner)
    except SlurmlabError as exc:
        return [Finding("job", "job", Verdict.FAIL, exc.message, exc.hint or "", f"job {jid}")], None
    if job.state == "PENDING":
        return _pending(runner, job, nodes, partitions, now), job
    if job.state in HOLDING:
        out = _guarded(
            "job.running",
            "job running",
            f"job {jid}",
            lambda: [judge_running(job, nodes, job_steps(jid, runner), now)],
        )
        return out + _gpu_findings(runner, job, node, gpu_timeout), job
    return [judge_ended(job)], job


def _reasons(runner: Runner, nodes: list[Node]) -> dict[str, tuple[str, str, str]]:
    """Who set each bad node's reason and when; none (the node record's own reason serves) when sinfo fails."""
    if not any(unhealthy(n) for n in nodes):
        return {}
    try:
        return node_reasons(runner)
    except SlurmlabError:
        return {}


def _node_findings(
    runner: Runner, node: str | None, job: Job | None, nodes: list[Node], partitions: list[Partition]
) -> list[Finding]:
    out: list[Finding] = []
    reasons = _reasons(runner, nodes)
    if node is not None:
        found = next((n for n in nodes if n.name == node), None)
        if found is None:
            known = ", ".join(n.name for n in nodes[:8]) + (" …" if len(nodes) > 8 else "")
            out.append(
                Finding(
                    "node",
                    "node state",
                    Verdict.FAIL,
                    "Slurm has no node of that name",
                    f"give one of: {known or '(no nodes)'} (`%sinfo` lists them)",
                    f"node {node}",
                )
            )
        else:
            out.append(judge_node(found, reason=reasons.get(found.name)))
    if job is not None:
        where = f"partition {job.partition}" if job.partition else "the cluster"
        usable = usable_nodes(job, nodes, partitions)
        out += [f for f in judge_nodes(usable, where, reasons) if f.subject != f"node {node}"]
    elif node is None:
        out += judge_nodes(nodes, reasons=reasons)
    return out


def doctor(
    runner: Runner | None = None,
    *,
    job: str | int | None = None,
    node: str | None = None,
    gpu_timeout: float = 30.0,
) -> Report:
    """Run the checks; never raises for what it finds (a bad job id raises RequestError before any call)."""
    runner = runner or get_runner()
    jid = check_job_id(job) if job is not None else None
    findings = [_controller(runner)]
    if findings[0].verdict is Verdict.FAIL:
        findings.append(skipped_for_controller("config.gres", "GRES configuration"))
        if jid is not None:
            findings.append(skipped_for_controller("job", "job", f"job {jid}"))
        findings.append(skipped_for_controller("node", "node state", f"node {node}" if node else ""))
        return Report(tuple(findings))
    try:
        nodes = list(list_nodes(runner))
        partitions = list(list_partitions(runner))
    except SlurmlabError as exc:
        findings.append(
            Finding(
                "config.gres",
                "GRES configuration",
                Verdict.FAIL,
                f"could not list the nodes: {exc.message}",
                exc.hint or "",
            )
        )
        return Report(tuple(findings))
    findings += _guarded(
        "config.gres", "GRES configuration", "", lambda: [judge_config(gres_types(runner), nodes)]
    )
    the_job: Job | None = None
    if jid is not None:
        found, the_job = _job_findings(runner, jid, node, nodes, partitions, gpu_timeout)
        findings += found
    findings += _node_findings(runner, node, the_job, nodes, partitions)
    return Report(tuple(findings))
