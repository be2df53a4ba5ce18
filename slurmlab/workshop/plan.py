"""What ``slurmlab workshop up`` does, decided before anything is done (pure): the class's accounting (account,
fair-share, the per-student GPU cap as a QOS), its reservation, and the steps in order, as a teacher reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ACCOUNT", "QOS", "RESERVATION", "WorkshopPlan", "sacctmgr_commands"]

ACCOUNT = (
    "workshop"  # the class account in the workshop's own database (its sandbox's): no site's to collide with
)
QOS = "workshop"
RESERVATION = "workshop"
_CLASS_SHARES = 100
# the sandbox's own accounts (slurmlab.sandbox.accounting) that an admitted user is put in: the seats leave them,
# so that every job of the class runs in the class account, under its QOS
_SANDBOX_ACCOUNTS = ("research", "teaching")


@dataclass(frozen=True)
class WorkshopPlan:
    """One class: its seats, the sandbox profile, the per-student GPU cap and whether it has a reservation."""

    seats: tuple[str, ...]
    profile: str
    gpu_cap: int = 1
    reservation: bool = False
    password_mode: str = "shared"

    def __post_init__(self) -> None:
        if isinstance(self.gpu_cap, bool) or not isinstance(self.gpu_cap, int) or not 0 <= self.gpu_cap <= 64:
            raise ValueError(f"--gpu-cap is a whole number of GPUs from 0 to 64, not {self.gpu_cap!r}")
        if not self.seats:
            raise ValueError("a workshop needs at least one seat")

    def steps(self) -> list[str]:
        """What up does, in order, one line each (``up`` prints them as it goes; ``--dry-run`` only prints)."""
        first, last = self.seats[0], self.seats[-1]
        span = first if len(self.seats) == 1 else f"{first} … {last}"
        out = [
            f"create {len(self.seats)} Unix accounts {span}, homes inside the workshop folder, no Unix password",
            f"start a sandbox of profile {self.profile} with accounting (slurmd, slurmctld, slurmdbd, MariaDB)",
            f"admit the seats to it; account {ACCOUNT} (fair-share) holds each seat's association",
            f"QOS {QOS}: at most {self.gpu_cap} GPU(s) per student at once (MaxTRESPerUser=gres/gpu={self.gpu_cap})",
        ]
        if self.reservation:
            out.append(f"reservation {RESERVATION} of every node for account {ACCOUNT}")
        out += [
            "copy the lessons into each home (owned by the student), keeping each one's checksum for reset",
            f"start JupyterHub for the seats ({self.password_mode} password), its form set by the teacher's settings",
        ]
        return out


def sacctmgr_commands(cluster: str, seats: Sequence[str], gpu_cap: int) -> list[list[str]]:
    """``sacctmgr -i`` arguments, in order, that put ``seats`` (users of the sandbox already) in the class account
    with fair-share and the class QOS, and nowhere else."""
    names = ",".join(seats)
    return [
        [
            "add",
            "account",
            ACCOUNT,
            f"Cluster={cluster}",
            "Description=slurmlab workshop",
            "Organization=workshop",
            f"Fairshare={_CLASS_SHARES}",
        ],
        ["add", "qos", QOS],
        ["modify", "qos", "where", f"name={QOS}", "set", "Priority=10", f"MaxTRESPerUser=gres/gpu={gpu_cap}"],
        ["add", "user", names, f"Cluster={cluster}", f"Account={ACCOUNT}", "Fairshare=1"],
        ["modify", "user", "where", f"name={names}", "set", f"DefaultAccount={ACCOUNT}"],
        [
            "modify",
            "user",
            "where",
            f"name={names}",
            f"account={ACCOUNT}",
            "set",
            f"QOS={QOS}",
            f"DefaultQOS={QOS}",
        ],
        ["delete", "user", "where", f"name={names}", f"account={','.join(_SANDBOX_ACCOUNTS)}"],
    ]
