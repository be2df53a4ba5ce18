"""The Slurm room's side of the one request pipeline: ask the cluster once, submit the checked model.

A runner replays what the recorded 24.11 cluster printed (the project's golden files, tests/data/slurm/24.11:
node1-2, 8 x h100 each, one partition gpu) and stops at salloc, so what ``Allocation.submit`` would run is
seen without a Slurm. One extra test replays the shared real-cluster capture (three partitions) instead.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from fake_slurm import golden_path
from shared_paths import require_shared

from slurmlab.core.request.pipeline import is_checked
from slurmlab.core.request.request import GpuCount, GpuRequest, RequestProblems
from slurmlab.errors import ControllerDownError, RequestError
from slurmlab.slurm.allocation import Allocation, check_request, salloc_argv
from slurmlab.slurm.runner import Runner, RunResult


class _Salloc(Exception):
    """Raised instead of starting salloc: carries the argv it would have run."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(" ".join(argv))
        self.argv = argv


def _golden_outputs() -> dict[tuple[str, ...], str]:
    def read(name: str) -> str:
        return golden_path("24.11", name).read_text()

    return {
        ("sinfo", "--version"): read("00_sinfo_version.txt"),
        ("scontrol", "--json", "show", "node"): read("s07_scontrol_json_show_node.json"),
        ("scontrol", "--json", "show", "partition"): read("s09_scontrol_json_show_partition.json"),
        ("sinfo", "-h", "-o", "%P"): read("s20_sinfo_partitions.txt"),
    }


def _shared_outputs() -> dict[tuple[str, ...], str]:
    d = require_shared("slurm", "24.11")
    # the default partition as `sinfo -h -o %P` marks it, read from the recorded `sinfo -o %P …`
    marked = [row.split()[0] for row in (d / "t02_sinfo_o_PaDTGN.txt").read_text().splitlines()[1:]]
    return {
        ("sinfo", "--version"): (d / "00_sinfo_version.txt").read_text(),
        ("scontrol", "--json", "show", "node"): (d / "s07_scontrol_show_node.json").read_text(),
        ("scontrol", "--json", "show", "partition"): (d / "s09_scontrol_show_partition.json").read_text(),
        ("sinfo", "-h", "-o", "%P"): "\n".join(dict.fromkeys(marked)) + "\n",
    }


def _replay(tmp_path: Path, *, down: bool = False, shared: bool = False) -> Any:
    outputs = _shared_outputs() if shared else _golden_outputs()

    class Replay(Runner):
        def run(self, argv: Any, **_: Any) -> RunResult:
            args = tuple(str(a) for a in argv)
            self.seen.append(args)
            if down or args not in outputs:
                raise ControllerDownError(
                    f"{args[0]}: slurm_load_partitions: Unable to contact slurm controller",
                    argv=args,
                    hint="check the controller with `scontrol ping`",
                )
            return RunResult(args, 0, outputs[args], "", 0.0)

        def popen(self, argv: Any, **_: Any) -> Any:
            raise _Salloc([str(a) for a in argv])

    runner = Replay(slurm_conf=str(tmp_path / "slurm.conf"))  # its own Slurm version cache entry
    runner.seen = []  # type: ignore[attr-defined]
    return runner


class _Poller:
    def watch(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("nothing is watched: salloc never started")


def _submit(request: Any, runner: Any, **kw: Any) -> list[str]:
    with pytest.raises(_Salloc) as info:
        Allocation.submit(request, runner=runner, poller=_Poller(), release_at_exit=False, **kw)  # type: ignore[arg-type]
    return info.value.argv


def test_the_cluster_is_asked_and_the_request_checked_against_it(tmp_path: Path) -> None:
    runner = _replay(tmp_path)
    request = check_request(["-p", "gpu", "--gpus=h100:2", "-t", "30"], runner)
    assert is_checked(request)
    assert (
        request.checked is not None
        and request.checked.note() == "checked against the cluster (1 partition), Slurm 24.11.5"
    )
    assert ("sinfo", "-h", "-o", "%P") in runner.seen  # 24.11 JSON partitions carry no default: sinfo says it
    with pytest.raises(RequestProblems) as info:
        check_request(["-p", "gpu", "--gpus=a100:1"], runner)
    assert "use a GPU type of partition 'gpu': h100" in info.value.problems[0].hint
    with pytest.raises(RequestProblems, match="partition .gpu. has only 16 GPUs"):
        check_request(["--gpus=17"], runner)  # checked against the default partition sinfo marked


def test_the_shared_cluster_is_asked_and_the_request_checked_against_it(tmp_path: Path) -> None:
    """Extra: the shared capture's three partitions, where a GPU type sits in another partition."""
    runner = _replay(tmp_path, shared=True)
    request = check_request(["-p", "gpu", "--gpus=h100:2", "-t", "30"], runner)
    assert is_checked(request)
    assert (
        request.checked is not None
        and request.checked.note() == "checked against the cluster (3 partitions), Slurm 24.11.5"
    )
    with pytest.raises(RequestProblems) as info:
        check_request(["-p", "mig", "--gpus=h100:1"], runner)
    assert "h100 GPUs are in partition gpu" in info.value.problems[0].hint


def test_a_malformed_line_never_reaches_slurm(tmp_path: Path) -> None:
    runner = _replay(tmp_path)
    with pytest.raises(RequestError, match="not a GPU count"):
        check_request(["--gpus=two"], runner)
    with pytest.raises(RequestError, match="takes no command"):
        Allocation.submit(["--gpus=1", "hostname"], runner=runner)
    assert runner.seen == []


def test_a_dry_run_without_a_controller_still_checks_the_request(tmp_path: Path) -> None:
    runner = _replay(tmp_path, down=True)
    request = check_request(["--gpus=1"], runner, need_cluster=False)
    assert request.checked is not None and "not checked against the cluster" in request.checked.note()
    assert "Unable to contact" in request.checked.note()
    with pytest.raises(ControllerDownError):
        check_request(["--gpus=1"], runner)


def test_submit_takes_the_checked_model_and_does_not_check_it_twice(tmp_path: Path) -> None:
    runner = _replay(tmp_path)
    request = check_request(["-J", "train", "-p", "gpu", "--gpus=2", "-t", "30"], runner)
    asked = len(runner.seen)
    argv = _submit(request, runner)
    assert len(runner.seen) == asked  # the cluster was not asked again
    # the job name, inside the model, names the job: first, as for every allocation
    assert argv[:3] == ["salloc", "--no-shell", "--job-name=train"] and argv[3].startswith(
        "--comment=slurmlab:"
    )
    assert argv[4:] == ["--partition=gpu", "--time=00:30:00", "--gpus=2"]
    assert argv == salloc_argv(request, tag=argv[3].split("=", 1)[1])
    with pytest.raises(TypeError, match="its own job name"):
        Allocation.submit(request, runner=runner, name="other")


def test_an_unchecked_or_changed_model_goes_through_the_pipeline(tmp_path: Path) -> None:
    runner = _replay(tmp_path)
    with pytest.raises(RequestProblems, match="partition .gpu. has only 16 GPUs"):
        Allocation.submit(GpuRequest(gpus=GpuCount(99)), runner=runner)
    checked = check_request(["-p", "gpu", "--gpus=2"], runner)
    with pytest.raises(RequestProblems, match="only 16 GPUs"):
        Allocation.submit(dataclasses.replace(checked, gpus=GpuCount(17)), runner=runner)


def test_tokens_run_the_same_pipeline_and_name_goes_in_as_a_job_name(tmp_path: Path) -> None:
    runner = _replay(tmp_path)
    argv = _submit(["--gpus=1", "-t", "5"], runner, name="test-steps")
    assert argv[2] == "--job-name=test-steps" and "--gpus=1" in argv and "--time=00:05:00" in argv
    assert ("scontrol", "--json", "show", "partition") in runner.seen
    with pytest.raises(RequestError, match="a100"):
        Allocation.submit(["--gpus=a100:1"], runner=runner)
    # unchecked, for Slurm to decide: the tokens as given, the cluster not asked
    runner.seen.clear()
    argv = _submit(["-p", "nosuchpart", "--gpus", "1"], runner, validate=False, name="raw")
    assert argv[2] == "--job-name=raw" and argv[-4:] == ["-p", "nosuchpart", "--gpus", "1"]
    assert runner.seen == []


@pytest.mark.parametrize(
    ("request_line", "words"),
    [
        ("-n 1000 --gpus=1 -t 5", ("1000 tasks", "224 CPUs in 2 nodes (112 each)", "at most -n 224", "-O")),
        ("-c 4 --mem-per-cpu=600G --gpus=1", ("2400 GiB per task", "the most is 2048000 MiB")),
        ("-n 1 --gpus-per-task=9", ("no node of partition 'gpu' has more than 8 GPUs", "--gpus-per-task=8")),
    ],
)
def test_a_request_too_big_for_the_partition_never_reaches_salloc(
    tmp_path: Path, request_line: str, words: tuple[str, ...]
) -> None:
    """Issue 13, point 8: refused with the numbers and the fix, not left pending for ever (PartitionConfig)."""
    runner = _replay(tmp_path)
    with pytest.raises(RequestProblems) as info:
        Allocation.submit(
            request_line.split(),
            runner=runner,
            poller=_Poller(),  # type: ignore[arg-type]
            release_at_exit=False,
        )
    text = str(info.value) + " " + (info.value.hint or "")
    assert all(w in text for w in words), text
    assert "PartitionConfig" not in text
    assert not any(args[0] in ("salloc", "sbatch") for args in runner.seen)
