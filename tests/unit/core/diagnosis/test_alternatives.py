"""A pending job's request rebuilt as options, the variants worth asking Slurm about, and `sbatch --test-only`
answers read back (recorded from a real 22.05 sandbox; hostile and garbage ones too)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from slurmlab.core.diagnosis.alternatives import (
    Alternative,
    StartEstimate,
    Variant,
    base_options,
    kept_options,
    parse_test_only,
    rank,
    variants,
)
from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.models import Partition
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
)
from slurmlab.core.slurm.timefmt import parse_timestamp
from slurmlab.errors import ParseError, SlurmlabError
from tests.unit.core.diagnosis.fake_cluster import read

UTC = timezone.utc


def _pending():  # type: ignore[no-untyped-def]
    return parse_scontrol_jobs(read("show_job_d_pending.txt"))[0]


def test_the_recorded_answer_is_read() -> None:
    a = parse_test_only(read("test_only_4gpus.txt"), 0)
    assert a.starts == parse_timestamp("2026-12-01T08:05:39") and a.nodes == "node1" and a.partition == "gpu"
    assert not a.refused


def test_a_refusal_keeps_slurms_words() -> None:
    a = parse_test_only(read("test_only_refused.txt"), 1)
    assert (
        a.starts is None and a.refused == "allocation failure: Requested node configuration is not available"
    )
    b = parse_test_only(
        "sbatch: error: invalid partition specified: nope\nallocation failure: Invalid partition "
        "name specified\n",
        1,
    )
    assert b.refused.startswith("invalid partition specified: nope; allocation failure")
    assert parse_test_only("", 1).refused == "exit code 1, no message"


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "Submitted batch job 5",
        "sbatch: Job 5 to start at tomorrow using 1 processors on nodes n1",
        "\x00" * 50,
        "Job x to start",
    ],
)
def test_garbage_from_sbatch_is_a_parse_error(garbage: str) -> None:
    with pytest.raises(SlurmlabError) as err:
        parse_test_only(garbage, 0)
    assert isinstance(err.value, ParseError)


def test_the_stray_word_of_26_05_is_skipped() -> None:
    a = parse_test_only(
        "\nsbatch: Job 4 to start at 2026-12-01T08:40:12 a using 1 processors on nodes node1 in "
        "partition gpu\n",
        0,
    )
    assert a.starts == parse_timestamp("2026-12-01T08:40:12") and a.nodes == "node1" and a.partition == "gpu"


def test_newer_slurm_wording_without_partition_is_read() -> None:
    a = parse_test_only(
        "sbatch: Job 3 to start at 2030-01-02T03:04:05 using 8 processors on nodes gpu[1-2]\n", 0
    )
    assert a.nodes == "gpu[1-2]" and a.partition == "" and a.starts is not None


def test_base_options_rebuild_the_recorded_request() -> None:
    job = _pending()
    assert base_options(job) == ["-p", "gpu", "-N", "1", "--mem=1000M", "--gpus=8", "-t", "20"]
    assert base_options(job, minutes="5")[-2:] == ["-t", "5"]
    assert base_options(job, partition="other")[:2] == ["-p", "other"]


def test_per_node_and_per_task_requests_keep_their_form() -> None:
    job = replace(
        _pending(), tres_per_job=(), tres_per_node=parse_gres("gres:gpu:a100:2"), num_tasks=4, num_cpus=16
    )
    opts = base_options(job)
    assert (
        "--gpus-per-node=a100:2" in opts
        and opts[opts.index("-n") + 1] == "4"
        and opts[opts.index("-c") + 1] == "4"
    )
    task = replace(job, tres_per_node=(), tres_per_task=parse_gres("gres:gpu:1"))
    assert "--gpus-per-task=1" in base_options(task)


def test_variants_of_the_recorded_job() -> None:
    job = _pending()
    nodes = parse_scontrol_nodes(read("show_node_d.txt"))
    parts = parse_scontrol_partitions(read("show_partition.txt"))
    found = variants(job, nodes, parts)
    kinds = [v.kind for v in found]
    assert kinds.count("time") == 2 and kinds.count("gpus") == 3
    assert [v.options[v.options.index("-t") + 1] for v in found if v.kind == "time"] == ["10", "5"]
    gpus = [next(o for o in v.options if o.startswith("--gpus")) for v in found if v.kind == "gpus"]
    assert [g.rsplit(":", 1)[-1].rsplit("=", 1)[-1] for g in gpus] == ["4", "2", "1"]
    for v in found:
        assert v.salloc_line.startswith("%salloc -p gpu ")


def test_other_types_and_partitions_are_offered() -> None:
    job = replace(_pending(), tres_per_job=parse_gres("gres:gpu:h100:8"))
    nodes = [
        replace(n, gres=parse_gres("gpu:a100:8")) if n.name == "node2" else n
        for n in parse_scontrol_nodes(read("show_node_d.txt"))
    ]
    parts = [*parse_scontrol_partitions(read("show_partition.txt")), Partition("big", "node2", ("node2",))]
    found = variants(job, nodes, parts)
    assert any(v.kind == "type" and "--gpus=a100:8" in v.options for v in found)
    assert any(v.kind == "partition" and v.options[:2] == ("-p", "big") for v in found)


def test_a_job_without_gpus_or_time_gets_no_variant() -> None:
    job = replace(_pending(), tres_per_job=(), time_limit=None)
    assert variants(job, [], []) == []


def test_salloc_line_quotes_what_needs_it() -> None:
    v = Variant("partition", "x", ("-p", "a b;rm"))
    assert v.salloc_line == "%salloc -p 'a b;rm'"


def test_rank_keeps_only_sooner_best_first() -> None:
    now = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

    def alt(kind: str, minutes: int | None, refused: str = "") -> Alternative:
        starts = now + timedelta(minutes=minutes) if minutes is not None else None
        return Alternative(Variant(kind, kind, ()), StartEstimate(starts, "n1", "gpu", refused))

    sooner, rest = rank(
        [
            alt("gpus", 10),
            alt("time", 10),
            alt("type", 1),
            alt("partition", 40),
            alt("gpus", None, "refused"),
        ],
        now + timedelta(minutes=30),
    )
    assert [(a.variant.kind, a.answer.starts) for a in sooner] == [
        ("type", now + timedelta(minutes=1)),
        ("time", now + timedelta(minutes=10)),
        ("gpus", now + timedelta(minutes=10)),
    ]
    assert [a.variant.kind for a in rest] == ["partition", "gpus"]
    assert "refused by Slurm: refused" in rest[1].line()
    everything, _ = rank([alt("gpus", 100)], None)
    assert len(everything) == 1
    # a change a limit would hold is never offered, whatever --test-only said (it applies no such limit)
    held = Alternative(
        Variant("time", "-t 5 (minutes) instead of 10", ()),
        StartEstimate(now, "n1", "gpu"),
        (
            "it would wait for QOS normal MaxTRESPU (per user): 4 GPU(s) in use + 2 GPU(s) asked > 4 "
            "GPU(s) allowed",
        ),
    )
    sooner, rest = rank([held], None)
    assert sooner == [] and rest == [held] and not held.offered
    assert held.line() == (
        "-t 5 (minutes) instead of 10: not offered: it would wait for QOS normal MaxTRESPU (per "
        "user): 4 GPU(s) in use + 2 GPU(s) asked > 4 GPU(s) allowed"
    )


@pytest.mark.parametrize(
    ("request_argv", "kept"),
    [
        (
            ["--gpus=2", "-t", "30", "--signal=USR1@120", "--gpu-bind=closest"],
            ["--signal=USR1@120", "--gpu-bind=closest"],
        ),
        (
            ["-A", "proj", "--qos", "debug", "-N2", "--gres-flags=enforce-binding"],
            ["-A", "proj", "--qos", "debug", "--gres-flags=enforce-binding"],
        ),
        (["-Aproj", "--exclusive", "-C", "h100&ib", "--mem=4G"], ["-Aproj", "--exclusive", "-C", "h100&ib"]),
        (["--gpus=1", "--signal"], []),  # a value that never came: nothing half-carried
        (["--account-x=1", "-Nq", "--gpus-per-node=1"], []),  # look-alikes are not carried
    ],
)
def test_kept_options_carry_what_a_job_record_cannot_give_back(
    request_argv: list[str], kept: list[str]
) -> None:
    assert kept_options(request_argv) == kept


@pytest.mark.parametrize(
    ("request_argv", "kept"),
    [
        (["-A", "proj", "--qos", "normal", "--signal=USR1@60"], ["--signal=USR1@60"]),
        (["-Aproj", "-qnormal", "--gpu-bind=closest"], ["--gpu-bind=closest"]),
        (["--account=proj", "--qos=normal", "--exclusive"], ["--exclusive"]),
    ],
)
def test_an_account_or_qos_the_change_sets_replaces_the_requests(
    request_argv: list[str], kept: list[str]
) -> None:
    """salloc takes the last of two --qos: the request's own, carried after the change's, would win."""
    assert kept_options(request_argv, ("--account", "--qos")) == kept
