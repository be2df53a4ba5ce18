"""What ``workshop up`` does, decided before it does it (issue 31 point 1): the steps, the class's accounting
commands and its reservation."""

from __future__ import annotations

import pytest

from slurmlab.slurm.reservations import reservation_argv
from slurmlab.workshop.plan import WorkshopPlan, sacctmgr_commands
from slurmlab.workshop.seats import seat_names


def test_the_plan_names_every_step_in_order() -> None:
    plan = WorkshopPlan(
        seat_names("student", 30), "seed", gpu_cap=2, reservation=True, password_mode="per-seat"
    )
    steps = plan.steps()
    assert steps[0].startswith("create 30 Unix accounts student01 … student30")
    assert "accounting" in steps[1]
    assert any("MaxTRESPerUser=gres/gpu=2" in s for s in steps)
    assert any(s.startswith("reservation workshop") for s in steps)
    assert "lessons" in steps[-2] and "JupyterHub" in steps[-1] and "per-seat" in steps[-1]
    assert not any("reservation" in s for s in WorkshopPlan(("student01",), "seed").steps())


@pytest.mark.parametrize("cap", [-1, 65, True, 1.5])
def test_a_gpu_cap_that_is_not_a_whole_number_of_gpus_is_refused(cap: object) -> None:
    with pytest.raises(ValueError, match="--gpu-cap"):
        WorkshopPlan(("student01",), "seed", gpu_cap=cap)  # type: ignore[arg-type]


def test_the_seats_end_in_the_class_account_under_its_qos_and_nowhere_else() -> None:
    cmds = sacctmgr_commands("sandbox", ["student01", "student02"], 1)
    heads = [c[:2] for c in cmds]
    # the account and the QOS exist before any user is put in them; the sandbox's accounts are left last
    assert heads == [
        ["add", "account"],
        ["add", "qos"],
        ["modify", "qos"],
        ["add", "user"],
        ["modify", "user"],
        ["modify", "user"],
        ["delete", "user"],
    ]
    assert "Fairshare=100" in cmds[0] and "Cluster=sandbox" in cmds[0]
    assert cmds[2][-1] == "MaxTRESPerUser=gres/gpu=1"
    assert cmds[3][2] == "student01,student02" and "Account=workshop" in cmds[3]
    assert cmds[4][-1] == "DefaultAccount=workshop"
    assert cmds[5][-2:] == ["QOS=workshop", "DefaultQOS=workshop"]
    assert cmds[6][-1] == "account=research,teaching"
    assert all(isinstance(a, str) and "\n" not in a for c in cmds for a in c)


def test_the_reservation_holds_the_nodes_for_the_class_account() -> None:
    argv = reservation_argv("workshop", ["node1", "node2"], ["workshop"])
    assert argv[:3] == ["scontrol", "create", "reservation"]
    assert "Nodes=node1,node2" in argv and "Accounts=workshop" in argv and "ReservationName=workshop" in argv
    for bad in (("work shop", ["node1"], ["w"]), ("w", ["node1 Flags=MAINT"], ["w"]), ("w", [], ["w"])):
        with pytest.raises(ValueError):
            reservation_argv(*bad)
