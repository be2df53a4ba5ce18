"""The doctor's cluster judgement on parsed models: the controller's ping, GresTypes vs the nodes, node states."""

from __future__ import annotations

import pytest

from slurmlab.core.diagnosis.cluster_checks import (
    CONTROLLER_DOWN,
    judge_config,
    judge_controller,
    judge_munge,
    judge_node,
    judge_nodes,
    parse_ping,
    parse_reasons,
    skipped_for_controller,
    split_reason,
    unhealthy,
)
from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.models import Node
from slurmlab.core.slurm.parse_text import parse_scontrol_nodes
from tests.unit.core.diagnosis.fake_cluster import read


def _node(
    name: str,
    state: str = "IDLE",
    flags: tuple[str, ...] = (),
    gres: str = "gpu:h100:8",
    reason: str | None = None,
) -> Node:
    return Node(name, state, flags, gres=parse_gres(gres), reason=reason)


def test_ping_of_a_real_controller_is_up() -> None:
    f = judge_controller(read("ping_up.txt"))
    assert f.verdict is Verdict.OK and "primary at vm is UP" in f.evidence


def test_every_controller_down_fails_with_the_fix() -> None:
    f = judge_controller("Slurmctld(primary) at head1 is DOWN\nSlurmctld(backup1) at head2 is DOWN\n")
    assert f.verdict is Verdict.FAIL
    assert "primary at head1: DOWN" in f.evidence and "backup1 at head2: DOWN" in f.evidence
    assert "slurmctld" in f.fix and "slurmlab sandbox up" in f.fix


def test_a_backup_taking_over_is_a_warning_not_an_outage() -> None:
    f = judge_controller("Slurmctld(primary) at head1 is DOWN\nSlurmctld(backup1) at head2 is UP\n")
    assert (
        f.verdict is Verdict.WARN
        and "backup1 at head2 answers" in f.evidence
        and "primary at head1" in f.evidence
    )


@pytest.mark.parametrize("garbage", ["", "\x00\x1b[31mUP", "Slurmctld(primary) at  is", "is UP is UP"])
def test_an_answer_naming_no_controller_fails_quoting_it(garbage: str) -> None:
    f = judge_controller(garbage)
    assert f.verdict is Verdict.FAIL and "named no controller" in f.evidence


def test_a_ping_that_could_not_run_fails_saying_why() -> None:
    f = judge_controller("", error="scontrol did not answer within 10 s")
    assert f.verdict is Verdict.FAIL and "did not answer within 10 s" in f.evidence


def test_munge_is_named_as_munge() -> None:
    f = judge_munge("Protocol authentication error", "start munged: munged --key-file ...")
    assert (
        f.verdict is Verdict.FAIL and "munge" in f.evidence and "Protocol authentication error" in f.evidence
    )
    assert f.fix == "start munged: munged --key-file ..."
    assert "munged" in judge_munge("x").fix


def test_checks_after_a_down_controller_skip_saying_so() -> None:
    f = skipped_for_controller("job", "job", "job 5")
    assert f.verdict is Verdict.SKIP and f.evidence == CONTROLLER_DOWN and f.subject == "job 5"


def test_parse_ping_reads_every_controller() -> None:
    lines = parse_ping("Slurmctld(primary) at a is UP\nSlurmctld(backup1) at b is DOWN\nnoise\n")
    assert [(c.role, c.host, c.state) for c in lines] == [("primary", "a", "UP"), ("backup1", "b", "DOWN")]


def test_config_of_the_real_sandbox_is_sane_and_notes_unused_types() -> None:
    nodes = parse_scontrol_nodes(read("show_node_d.txt"))
    f = judge_config(["gpu", "shard", "mps"], nodes)
    assert f.verdict is Verdict.OK and "16 GPU(s)" in f.evidence
    assert any("mps" in d and "on no node" in d for d in f.details)


def test_a_node_gres_the_cluster_does_not_declare_fails() -> None:
    f = judge_config(["gpu"], [_node("n1", gres="gpu:a100:4,shard:a100:16"), _node("n2")])
    assert f.verdict is Verdict.FAIL and "does not declare" in f.evidence
    assert any(d.startswith("shard on n1") for d in f.details) and "GresTypes" in f.fix


def test_a_node_that_found_fewer_gpus_than_configured_fails() -> None:
    sick = _node(
        "n7",
        "IDLE",
        ("DRAIN",),
        reason="gres/gpu count reported lower than configured (7 < 8) [slurm@2026-11-30T10:00:00]",
    )
    f = judge_config(["gpu"], [_node("n1"), sick])
    assert f.verdict is Verdict.FAIL and "fewer GPUs" in f.evidence
    assert f.details[0].startswith("n7: gres/gpu count reported lower")


def test_split_reason_reads_who_and_when() -> None:
    assert split_reason("fan failure [root@2026-12-01T07:55:35]") == (
        "fan failure",
        "root",
        "2026-12-01T07:55:35",
    )
    assert split_reason("no brackets") == ("no brackets", "", "")
    assert split_reason("odd [x] y") == ("odd [x] y", "", "")
    assert split_reason(None) == ("", "", "")


def test_the_recorded_drained_node_names_reason_who_when_and_the_admin_fix() -> None:
    node2 = next(n for n in parse_scontrol_nodes(read("show_node_d.txt")) if n.name == "node2")
    f = judge_node(node2)
    assert f.verdict is Verdict.FAIL and f.subject == "node node2"
    assert "fan failure" in f.evidence and "set by root at 2026-12-01T07:55:35" in f.evidence
    assert "scontrol update nodename=node2 state=resume" in f.fix and "admins" in f.fix
    assert "another node or partition" in f.fix
    assert judge_node(node2, named=False).verdict is Verdict.WARN


def test_not_responding_and_down_nodes_are_unhealthy_idle_is_not() -> None:
    assert unhealthy(_node("a", "IDLE", ("NOT_RESPONDING",))) == ["NOT_RESPONDING"]
    assert unhealthy(_node("a", "DOWN")) == ["DOWN"]
    assert unhealthy(_node("a", "MIXED")) == []
    f = judge_node(_node("a", "DOWN", reason="Not responding"))
    assert f.verdict is Verdict.FAIL and "Not responding" in f.evidence and "state=resume" in f.fix


def test_judge_nodes_lists_each_bad_node_or_one_ok() -> None:
    found = judge_nodes([_node("a"), _node("b", "DOWN"), _node("c", "IDLE", ("DRAIN",))])
    assert [f.subject for f in found] == ["node b", "node c"] and {f.verdict for f in found} == {Verdict.WARN}
    ok = judge_nodes([_node("a")], "partition gpu")
    assert len(ok) == 1 and ok[0].verdict is Verdict.OK and "partition gpu" in ok[0].evidence


def test_sinfo_reasons_are_read_with_a_reason_that_holds_separators() -> None:
    got = parse_reasons(read("sinfo_reasons.txt") + "n3|N/A|Unknown|a|b|c\ngarbage line\n|x|y|z\n\x00\n")
    assert got == {"node2": ("fan failure", "root", "2026-12-01T07:55:35"), "n3": ("a|b|c", "", "")}


def test_who_and_when_from_sinfo_win_over_the_record() -> None:
    node = _node("n1", "IDLE", ("DRAIN",), reason="JSON reason without brackets")
    f = judge_node(node, reason=("bad fan", "alice", "2026-12-01T08:00:00"))
    assert "bad fan (set by alice at 2026-12-01T08:00:00)" in f.evidence
    assert "JSON reason without brackets" in judge_node(node, reason=("", "", "")).evidence
