"""The binding judgement on constructed inputs with known answers."""

from __future__ import annotations

import pytest

import slurmlab
from slurmlab.core.framing import BEGIN, END, frame
from slurmlab.core.gpu.binding import (
    HONOURED,
    NOT_HONOURED,
    NOT_REQUESTED,
    UNKNOWN,
    NodeRecord,
    TaskReport,
    explain,
    gpu_bind_value,
    parse_task_reports,
)
from slurmlab.core.palette import FAILED
from slurmlab.errors import ParseError

DGX = slurmlab.topology(profile="dgx-h100")  # GPUs 0-3: NUMA 0, CPUs 0-55; GPUs 4-7: NUMA 1, CPUs 56-111
NODE0 = frozenset(range(0, 56))
NODE1 = frozenset(range(56, 112))


def _task(
    rank: int, step: tuple[int, ...], visible: str | None, mask: set[int], host: int | None = 224
) -> TaskReport:
    return TaskReport(rank, "n1", step, tuple(visible.split(",")) if visible else None, frozenset(mask), host)


def test_closest_honoured_when_each_task_gets_the_gpu_on_its_socket() -> None:
    reports = [_task(0, (0, 4), "0", {0, 1}), _task(1, (0, 4), "4", {60, 61})]
    table = explain(
        reports,
        {"n1": DGX},
        [NodeRecord("n1", (0, 4), frozenset({0, 1, 60, 61}))],
        tres_bind="gres/gpu:closest",
    )
    assert [r.closest for r in table.rows] == [HONOURED, HONOURED]
    assert table.closest == HONOURED
    assert table.rows[0].gpu_numa == "0" and table.rows[1].gpu_numa == "1"
    assert table.rows[1].gpu_cpus == NODE1
    assert table.enforce == NOT_REQUESTED
    assert table.highlight_gpus("n1") == (0, 4)
    assert table.task_cpus("n1") == {"task 0": frozenset({0, 1}), "task 1": frozenset({60, 61})}


def test_closest_not_honoured_when_a_task_gets_the_far_gpu() -> None:
    reports = [_task(0, (0, 4), "4", {0, 1}), _task(1, (0, 4), "0", {60})]
    table = explain(reports, {"n1": DGX}, tres_bind="gres/gpu:closest")
    assert [r.closest for r in table.rows] == [NOT_HONOURED, NOT_HONOURED]
    assert table.closest == NOT_HONOURED
    assert "nearest GPU(s) 0" in table.rows[0].why[0]
    assert "NOT honoured" in table.text()
    assert f"color:{FAILED}" in table._repr_html_()  # the palette's failure red


def test_a_task_seeing_every_gpu_while_one_is_near_is_not_closest() -> None:
    table = explain([_task(0, (0, 4), None, {2})], {"n1": DGX}, tres_bind="gres/gpu:closest")
    assert table.rows[0].gpus == (0, 4) and table.rows[0].closest == NOT_HONOURED


def test_no_near_gpu_falls_back_to_all_step_gpus() -> None:
    # both GPUs on NUMA 1, the task's CPUs on socket 0: Slurm gives it all the step's GPUs
    table = explain([_task(0, (4, 5), "4,5", {3})], {"n1": DGX}, tres_bind="gres/gpu:closest")
    assert table.rows[0].closest == HONOURED


def test_cgroup_renumbered_visible_devices_map_through_step_gpus() -> None:
    # ConstrainDevices: the task sees 0 and 1, which are Slurm's IDX 5 and 6
    table = explain([_task(0, (5, 6), "1", {70})], {"n1": DGX})
    assert table.rows[0].gpus == (6,)
    assert table.rows[0].closest == NOT_REQUESTED


def test_enforce_binding_honoured_and_not() -> None:
    good = explain(
        [_task(0, (1,), "1", {4, 5})],
        {"n1": DGX},
        [NodeRecord("n1", (1,), frozenset({4, 5}))],
        enforce_binding=True,
    )
    assert good.rows[0].enforce == HONOURED and good.enforce == HONOURED
    bad = explain(
        [_task(0, (1,), "1", {4, 60})],
        {"n1": DGX},
        [NodeRecord("n1", (1,), frozenset({4, 60}))],
        enforce_binding=True,
    )
    assert bad.rows[0].enforce == NOT_HONOURED
    assert any("CPU_IDs 60" in w for w in bad.rows[0].why)


def test_unknown_without_topology() -> None:
    table = explain([_task(0, (1,), "1", {4})], {}, tres_bind="gres/gpu:closest", enforce_binding=True)
    assert table.rows[0].closest == UNKNOWN and table.rows[0].enforce == UNKNOWN
    assert table.closest == UNKNOWN


def test_sandbox_masks_are_not_compared_with_topology_cpu_ids() -> None:
    # the host has 2 CPUs, the node claims 112: judge by CPU_IDs, draw the job's CPUs
    reports = [_task(0, (4, 5), "4,5", {0}, host=2), _task(1, (4, 5), "4,5", {1}, host=2)]
    rec = NodeRecord("n1", (4, 5), frozenset({56, 57}))
    table = explain(reports, {"n1": DGX}, [rec], tres_bind="gres/gpu:closest", enforce_binding=True)
    assert [r.closest for r in table.rows] == [HONOURED, HONOURED]
    assert [r.enforce for r in table.rows] == [HONOURED, HONOURED]
    assert table.task_cpus("n1") == {"task 0-1 (Slurm CPU_IDs)": frozenset({56, 57})}
    assert any("real CPUs" in n for n in table.notes)


def _line(rank: object, node: object = "n1", *, label: int = 0, **extra: object) -> str:
    """Task ``label``'s report as ``srun --label`` prints it (its SLURM_PROCID is ``rank``)."""
    env = {
        "SLURM_PROCID": rank,
        "SLURMD_NODENAME": node,
        "SLURM_STEP_GPUS": "0,1",
        "CUDA_VISIBLE_DEVICES": "1",
    }
    return f"{label}: " + frame({"env": env, "affinity": [3, 4], "host_cpus": 8, **extra})


def test_task_reports_are_parsed_and_chatter_ignored() -> None:
    reps = parse_task_reports(["srun: warning: whatever", _line("1", label=1), _line("0")])
    assert [r.rank for r in reps] == [0, 1]
    assert reps[0].step_gpus == (0, 1) and reps[0].visible == ("1",) and reps[0].affinity == frozenset({3, 4})


@pytest.mark.parametrize(
    "line",
    [
        f"0: {BEGIN}{{broken{END}",
        _line(None),
        _line("0", affinity="all"),
    ],
)
def test_bad_task_reports_are_parse_errors(line: str) -> None:
    with pytest.raises(ParseError):
        parse_task_reports([line])


def test_bad_step_gpus_are_quoted() -> None:
    line = _line("0").replace('"0,1"', '"zero"')
    with pytest.raises(ParseError, match="zero"):
        parse_task_reports([line])


@pytest.mark.parametrize(
    ("tres", "want"),
    [
        ("gres/gpu:closest", "closest"),
        ("gpu:closest", "closest"),
        ("gres/gpu:map_gpu:0,1", "map_gpu:0,1"),
        (None, None),
        ("", None),
        ("gres/shard:per_task:1", None),
    ],
)
def test_gpu_bind_value(tres: str | None, want: str | None) -> None:
    assert gpu_bind_value(tres) == want


def test_a_sandbox_node_without_cpu_ids_is_unknown_and_names_the_missing_fact() -> None:
    # real masks name host CPUs, and Slurm recorded no CPU_IDs: nothing to judge by, so no "honoured"
    reports = [_task(0, (4,), "4", {0}, host=2)]
    table = explain(
        reports,
        {"n1": DGX},
        [NodeRecord("n1", (4,), None)],
        tres_bind="gres/gpu:closest",
        enforce_binding=True,
    )
    row = table.rows[0]
    assert (row.closest, row.enforce) == (UNKNOWN, UNKNOWN)
    assert all("no CPU_IDs for the job on n1" in w for w in row.why), row.why
    assert "job_resources" in row.why[0]


def test_a_shard_task_is_judged_on_the_gpu_holding_the_jobs_shards() -> None:
    # no SLURM_STEP_GPUS in a shard task: the record's shard GPU stands in, both ways round
    near = NodeRecord("n1", (), frozenset({60}), shard_gpus=(5,))
    far = NodeRecord("n1", (), frozenset({60}), shard_gpus=(1,))
    task = _task(0, (), None, {0}, host=2)
    good = explain([task], {"n1": DGX}, [near], tres_bind="gres/gpu:closest", enforce_binding=True)
    assert good.rows[0].gpus == (5,) and (good.closest, good.enforce) == (HONOURED, HONOURED)
    bad = explain([task], {"n1": DGX}, [far], tres_bind="gres/gpu:closest", enforce_binding=True)
    assert bad.rows[0].gpus == (1,) and bad.enforce == NOT_HONOURED
    assert "shards on GPU 1" in bad.text()


def test_a_gpu_missing_from_the_topology_is_named() -> None:
    table = explain([_task(0, (9,), "9", {0})], {"n1": DGX}, tres_bind="gres/gpu:closest")
    assert table.rows[0].closest == UNKNOWN
    assert "GPU(s) 9 of the step are not in n1's topology" in table.rows[0].why[0]
