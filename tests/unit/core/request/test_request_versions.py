"""What one Slurm version accepts and another refuses, judged before anything is submitted.

The refusals are Slurm's own, recorded from real 24.11 and 26.05 sandboxes (``tests/data/slurm/<version>/e1*``):
``--uid``/``--gid`` are gone from salloc/srun since 24.11, and 26.05 refuses ``--gres=gpu`` beside
``--gpus-per-node``. With no version known nothing is refused for it: a warning says what may happen.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.request.request import (
    RETIRED_OPTIONS,
    RequestProblems,
    parse_request,
    pass_through_options,
    version_text,
)
from slurmlab.core.request.validate import GRES_WITH_GPUS_PER_NODE_SAYS, validate

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"
V2205, V2411, V2505, V2605 = (22, 5, 8), (24, 11, 5), (25, 5, 0), (26, 5, 5)


def _problems(
    line: str, version: tuple[int, ...] | None, inventory: ClusterInventory | None = None
) -> list[str]:
    with pytest.raises(RequestProblems) as info:
        validate(parse_request(shlex.split(line)), inventory, version=version)
    return [f"{p.message} | {p.hint}" for p in info.value.problems]


def test_version_text_writes_the_month_with_two_digits() -> None:
    assert version_text(V2205) == "22.05.8"
    assert version_text((26, 5)) == "26.05"
    assert version_text((24, 11, 5)) == "24.11.5"


@pytest.mark.parametrize("flag", ["--uid", "--gid"])
def test_uid_and_gid_leave_the_pass_through_list_where_slurm_refuses_them(flag: str) -> None:
    assert flag in pass_through_options(V2205)
    for version in (V2411, V2605, None):
        assert flag not in pass_through_options(version), version
    assert "--export" in pass_through_options(V2605)  # the others stay


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_the_refusal_slurmlab_predicts_is_the_one_recorded(version: str) -> None:
    said = (DATA / version / "e13_salloc_uid.stderr").read_text()
    assert "unrecognized option '--uid=nobody'" in said
    with pytest.raises(RequestProblems) as info:
        parse_request(["--uid=nobody", "-t", "5"], version=tuple(int(p) for p in version.split(".")))
    problem = info.value.problems[0]
    assert "--uid=nobody" in problem.message and "unrecognized option" in problem.message
    assert version in problem.message and "submit as that user" in problem.hint


def test_a_separate_value_stays_with_its_retired_option() -> None:
    old = parse_request(["--uid", "bob", "-n1"], version=V2205)
    assert old.extra == (("--uid", "bob"),) and old.command == () and old.warnings == ()
    assert validate(old, version=V2205).warnings == ()
    with pytest.raises(
        RequestProblems, match=r"--gid users: salloc and srun of Slurm 26\.05\.5 have no --gid"
    ):
        parse_request(["--gid", "users", "-n1"], version=V2605)


def test_a_request_parsed_without_a_version_is_judged_by_validate() -> None:
    req = parse_request(["--uid=bob", "-n1"])
    assert req.extra == (("--uid=bob",),) and req.warnings == ()
    assert any("--uid" in p and "24.11.5" in p for p in _problems("--uid=bob -n1", V2411))
    assert validate(req, version=V2205).warnings == ()
    for unknown in (None, (23, 2, 7)):
        (warning,) = validate(req, version=unknown).warnings
        assert "--uid=bob" in warning and "24.11 and later refuse" in warning


def test_26_05_refuses_gres_gpu_beside_gpus_per_node_in_its_own_words() -> None:
    said = (DATA / "26.05" / "e14_salloc_gres_and_gpus_per_node.stderr").read_text()
    assert GRES_WITH_GPUS_PER_NODE_SAYS in said
    assert (
        GRES_WITH_GPUS_PER_NODE_SAYS
        not in (DATA / "24.11" / "e14_salloc_gres_and_gpus_per_node.stderr").read_text()
    )
    for line in ("--gres=gpu:1 --gpus-per-node=1", "--gres=gpu:h100:2 --gpus-per-node=h100:2"):
        (problem,) = _problems(line, V2605)
        assert GRES_WITH_GPUS_PER_NODE_SAYS in problem and "26.05.5" in problem and "keep one" in problem


def test_24_11_takes_the_pair_and_an_unknown_version_is_warned_not_refused() -> None:
    req = parse_request(["--gres=gpu:2", "--gpus-per-node=2"])
    (same,) = validate(req, version=V2411).warnings
    assert "twice" in same and "26.05" not in same
    for unknown in (None, V2505):
        (warning,) = validate(req, version=unknown).warnings
        assert "26.05 and later refuse" in warning and GRES_WITH_GPUS_PER_NODE_SAYS in warning
    # different counts are wrong on every version, and said once
    for version in (V2205, V2411, None):
        (problem,) = _problems("--gres=gpu:1 --gpus-per-node=2", version)
        assert "two different per-node GPU counts" in problem


def _two_nodes() -> ClusterInventory:
    node = {"cpus": 48, "memory_mb": 64000, "sockets": 2, "gpus": {"h100": 4}}
    return ClusterInventory.build(
        nodes=[NodeInventory("node1", **node), NodeInventory("node2", **node)],  # type: ignore[arg-type]
        partitions={"gpu": ["node1", "node2"]},
        default="gpu",
        name="two",
    )


def test_more_task_cpus_than_the_partition_holds_is_refused_before_slurm() -> None:
    inv = _two_nodes()
    (problem,) = _problems("-N2 -n 300", V2411, inv)
    assert "300 tasks of 1 CPU = 300 CPUs" in problem and "96 CPUs in 2 nodes (48 each)" in problem
    assert "at most -n 96" in problem and "-O" in problem and "PartitionConfig" not in problem
    (problem,) = _problems("-N1 -n 30 -c 2", None, inv)
    assert "60 CPUs" in problem and "-N 1 gives at most 48 CPUs" in problem and "more nodes" in problem
    assert "at most -n 24" in problem
    for fits in ("-N2 -n 96", "-n 48 -c 2", "-N2 -n 300 --overcommit", "-n 200 -O"):
        validate(parse_request(shlex.split(fits)), inv, version=V2605)


def test_every_retired_option_names_its_fix() -> None:
    for flag, retired in RETIRED_OPTIONS.items():
        assert retired.flag == flag and retired.fix
        assert retired.bound.refuses(V2205) is False and retired.bound.refuses(V2411) is True
        assert retired.bound.refuses(None) is None and retired.bound.refuses((23, 11, 1)) is None
