"""How many GPUs this user may hold at once, under the site's QOS and association limits.

A request over such a cap is not refused: Slurm queues it and it waits with a reason such as
``QOSMaxGRESPerUser`` until the cap is raised, which for a request larger than the cap itself is forever. A
workshop gives each seat such a cap (a class shares one cluster); a lesson, a form or a script that sizes its
request to :func:`gpu_cap` fits every seat. Read from the accounting database (``sacctmgr``: slurmdbd, not
slurmctld; at most four calls), checked with the same rules :mod:`slurmlab.core.diagnosis.limit_rules` applies
to a pending job.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.diagnosis.limit_rules import Hold, most_gpus
from slurmlab.errors import AccountingOffError
from slurmlab.slurm.accounting_queries import default_account, limit_tables
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["GpuCap", "gpu_cap"]


@dataclass(frozen=True)
class GpuCap:
    """``gpus``: the most GPUs one job of ``user`` may hold while no other job of theirs runs (None: no limit
    caps them; the cluster's size does). ``limits``: what one GPU more would meet, each in words.
    ``why_none``: why there is no cap (accounting off, no association) when ``gpus`` is None."""

    user: str
    account: str
    qos: str
    gpus: int | None
    limits: tuple[str, ...] = ()
    why_none: str = ""

    def allows(self, gpus: int) -> bool:
        """Whether a job of ``gpus`` GPUs fits under the cap (it may still wait for free GPUs)."""
        return self.gpus is None or gpus <= self.gpus

    def __str__(self) -> str:
        if self.gpus is None:
            return f"{self.user}: no GPU cap ({self.why_none or 'no QOS or association limit caps GPUs'})"
        return (
            f"{self.user} (account {self.account}, QOS {self.qos}): at most {self.gpus} GPU(s) at once; "
            f"one more meets {'; '.join(self.limits)}"
        )


def _default_qos(row_qos: str, allowed: list[str]) -> str:
    # Slurm's choice for a job that names no QOS: the association's DefaultQOS, else its only QOS, else normal
    return row_qos or (allowed[0] if len(allowed) == 1 else "normal")


def gpu_cap(runner: Runner | None = None, user: str | None = None) -> GpuCap:
    """This user's GPU cap (their default account and QOS); accounting off is no cap. Where the accounting
    database does not answer (slurmdbd down, sacctmgr closed to users), the cap is unknown: None, saying why,
    so that a lesson goes on as on a cluster without caps and a request over one says why it waits."""
    runner = runner or get_runner()
    user = user or current_user()
    try:
        tables = limit_tables(runner, user)
        account = default_account(runner, user) if tables is not None else None
    except AccountingOffError as exc:
        return GpuCap(user, "", "", None, why_none=f"unknown: {exc.message}")
    if tables is None:
        return GpuCap(user, "", "", None, why_none="Slurm keeps no accounting here: no QOS limits apply")
    account = account or next(iter(tables.accounts_of(user)), "")
    row = tables.user_row(user, account)
    if row is None:
        return GpuCap(user, account, "", None, why_none=f"no association of {user} in account {account!r}")
    qos = _default_qos(row.get("DefaultQOS", ""), tables.allowed_qos(user, account))
    gpus, over = most_gpus(tables, user, account, qos)
    return GpuCap(user, account, qos, gpus, tuple(_words(h) for h in over))


def _words(hold: Hold) -> str:
    return f"{hold.limit} ({hold.scope}: {hold.cap:g} allowed)"
