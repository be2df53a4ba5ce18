"""Which change lifts the limit that holds a job, and what a changed request asks as the limits count it (pure).

:func:`ask_of` turns the job's record and one :class:`~.alternatives.Variant` into an :class:`~.limit_rules.Ask`;
:func:`lifting_variants` are the changes that may lift a QOS or association limit (as many GPUs as still fit
under the cap, another QOS or account the user's association allows), each then checked like every other
variant; :func:`lifts` says in words which change lifts each limit that holds the job now (ask for less, end
one of your own jobs that count, another QOS or account), or that only time will.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from slurmlab.core.diagnosis.alternatives import Variant, base_options, gpu_option, gpu_request
from slurmlab.core.diagnosis.limit_rules import Ask, Hold, JobUse, LimitTables, amounts, holds, unit
from slurmlab.core.slurm.models import Job, Partition
from slurmlab.core.slurm.timefmt import parse_duration
from slurmlab.errors import ParseError

__all__ = ["ask_of", "lifting_variants", "lifts", "pinned"]


def _times(option: str, job: Job) -> int:
    """How many times the count of a GPU option is taken: per job once, per node on each node, per task."""
    if option == "--gpus-per-node":
        return job.num_nodes or 1
    if option == "--gpus-per-task":
        return job.num_tasks or 1
    return 1


def ask_of(job: Job, variant: Variant | None, *, user: str, account: str, qos: str) -> Ask:
    """What the job (``variant`` None) or one variant of it asks, as the limits count it."""
    tres = amounts(job.tres_req)
    asked = gpu_request(job)
    if asked is not None:
        option, item = asked
        count = variant.gpus if variant is not None and variant.gpus is not None else item.amount
        gpu_type = variant.gpu_type if variant is not None and variant.gpu_type else item.type
        total = float(count * _times(option, job))
        tres = {k: v for k, v in tres.items() if not (k == "gres/gpu" or k.startswith("gres/gpu:"))}
        tres["gres/gpu"] = total
        if gpu_type:
            tres[f"gres/gpu:{gpu_type}"] = total
    elif "gres/gpu" not in tres:
        total = float(
            sum(
                g.amount * _times(opt, job)
                for opt, items in (
                    ("--gpus", job.tres_per_job),
                    ("--gpus-per-node", job.tres_per_node),
                    ("--gpus-per-task", job.tres_per_task),
                )
                for g in items
                if g.name == "gpu"
            )
        )
        if total:
            tres["gres/gpu"] = total
    minutes = (
        variant.minutes
        if variant is not None and variant.minutes is not None
        else math.ceil(job.time_limit / 60)
        if job.time_limit
        else None
    )
    part = variant.partition if variant is not None and variant.partition else job.partition or ""
    return Ask(
        user,
        variant.account if variant is not None and variant.account else account,
        variant.qos if variant is not None and variant.qos else qos,
        tuple(p for p in part.split(",") if p),
        tres,
        job.num_nodes or 1,
        minutes,
    )


def pinned(variant: Variant, *, account: str, qos: str) -> Variant:
    """The variant with the job's account and QOS written out (where it changes neither): its ``%salloc`` line
    then asks what the limits were checked against, not the user's defaults."""
    head = ([] if variant.account or not account else [f"--account={account}"]) + (
        [] if variant.qos or not qos else [f"--qos={qos}"]
    )
    return replace(variant, options=(*head, *variant.options)) if head else variant


def _max_wall_minutes(row: Mapping[str, str]) -> int | None:
    raw = row.get("MaxWall", "")
    try:
        seconds = parse_duration(raw) if raw.strip() else None
    except ParseError:
        return None
    return None if seconds is None else seconds // 60


def _fitting_gpus(
    job: Job, ask: Ask, tables: LimitTables | None, jobs: Sequence[JobUse], partitions: Sequence[Partition]
) -> list[Variant]:
    """As many GPUs as still fit under every GPU cap that holds the job, in the job's own option form."""
    asked = gpu_request(job)
    if asked is None:
        return []
    option, item = asked
    for n in range(item.amount - 1, 0, -1):
        trial = Variant("gpus", "", (), gpus=n)
        blocking = [
            h
            for h in holds(
                ask_of(job, trial, user=ask.user, account=ask.account, qos=ask.qos), tables, jobs, partitions
            )
            if (h.key or "").startswith("gres/gpu")
        ]
        if not blocking:
            return [
                Variant(
                    "gpus",
                    f"{n} GPU(s) ({option}) instead of {item.amount}: as many as fit under the cap",
                    tuple(base_options(job, gpus=gpu_option(option, item.type, n))),
                    gpus=n,
                )
            ]
    return []


def lifting_variants(
    job: Job, ask: Ask, tables: LimitTables | None, jobs: Sequence[JobUse], partitions: Sequence[Partition]
) -> list[Variant]:
    """The changes that may lift the limits holding the job: as many GPUs as fit, each other QOS the user's
    association allows (its MaxWall as the time where the job asks more), each other account of the user."""
    out = _fitting_gpus(job, ask, tables, jobs, partitions)
    if tables is None:
        return out
    minutes = ask.minutes
    for q in tables.allowed_qos(ask.user, ask.account, ask.partitions):
        row = tables.qos_row(q)
        if q == ask.qos or row is None:
            continue
        wall = _max_wall_minutes(row)
        shorter = wall if wall and minutes and minutes > wall else None
        out.append(
            Variant(
                "qos",
                f"QOS {q} instead of {ask.qos}" + (f" with -t {shorter} (its MaxWall)" if shorter else ""),
                (*base_options(job, minutes=str(shorter) if shorter else None), f"--qos={q}"),
                minutes=shorter,
                qos=q,
            )
        )
    for a in tables.accounts_of(ask.user):
        if a == ask.account:
            continue
        allowed = tables.allowed_qos(ask.user, a, ask.partitions)
        row = tables.user_row(ask.user, a, ask.partitions)
        q = ask.qos if ask.qos in allowed else (row.get("DefaultQOS", "") if row else "") or ask.qos
        out.append(
            Variant(
                "account",
                f"account {a} instead of {ask.account}" + (f" (QOS {q})" if q != ask.qos else ""),
                (*base_options(job), f"--account={a}", f"--qos={q}"),
                qos=q,
                account=a,
            )
        )
    return out


def _ending(h: Hold, need: float) -> str:
    """Which one of the user's own jobs that count would free enough when it ends."""
    own = sorted(h.mine, key=lambda j: ((j.tres or {}).get(h.key, 1.0) if h.key else 1.0, j.job_id))
    enough = [j for j in own if h.key is None or (j.tres or {}).get(h.key, 0.0) >= need]
    if not enough:
        return ""
    j = enough[0]
    held = f", {unit(h.key, (j.tres or {}).get(h.key, 0.0))}" if h.key else ""
    ends = f", ends {j.ends.strftime('%Y-%m-%d %H:%M:%S')}" if j.ends else ""
    return f"end your job {j.job_id}{held}{ends} (`%scancel {j.job_id}`)"


def lifts(found: Sequence[Hold], freed_by: Sequence[tuple[Variant, Sequence[str]]] = ()) -> list[str]:
    """What lifts each limit that holds the job, in words: ask for less (as much as still fits), end one of
    your own jobs that count, a shorter time; and the ``freed_by`` variants no limit would hold (another QOS,
    account)."""
    out: list[str] = []
    for h in found:
        if h.unknown:
            continue
        if h.key == "time":
            out.append(f"-t {h.cap:g} or less ({h.limit})")
        elif h.scope in ("per job", "per node"):
            out.append(f"ask for at most {unit(h.key, h.cap)} {h.scope} ({h.limit})")
        elif h.scope == "at least":
            out.append(f"ask for at least {unit(h.key, h.cap)} ({h.limit})")
        else:
            if h.key is not None and h.room >= 1 and h.room < h.asked:
                out.append(f"ask for {unit(h.key, h.room)} or fewer: that still fits under {h.limit}")
            ending = _ending(h, h.asked - max(0.0, h.room))
            if ending:
                out.append(f"{ending}: that frees {h.limit}")
    out += [v.change + f" (`{v.salloc_line}`)" for v, held in freed_by if not held]
    return list(dict.fromkeys(out))
