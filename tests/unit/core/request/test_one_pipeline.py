"""One request pipeline: tokens -> GpuRequest -> checked against the cluster, built in one place only.

The guard reads the package's source (AST): a second place that validates a request, or parses salloc
tokens into one, fails here with the place named. The pipeline itself runs on real inputs: the recorded
22.05, 24.11 and 26.05 clusters of the project's golden files (tests/data/slurm) and every ``salloc`` line
recorded against them, judged as the real Slurm judged it, plus hostile and malformed lines. The shared
real-cluster capture (``../shared/fixtures/slurm``) is read by an extra test that skips without it.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import shlex
from pathlib import Path

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_inventory, golden_path
from shared_paths import require_shared

import slurmlab
from slurmlab.core.request.inventory import ClusterInventory
from slurmlab.core.request.pipeline import CommandInRequest, check_request, is_checked, read_request
from slurmlab.core.request.request import GpuCount, GpuRequest, RequestProblems
from slurmlab.errors import RequestError
from slurmlab.testing import recorded

PKG = Path(slurmlab.__file__).resolve().parent
PIPELINE = "core/request/pipeline.py"

# What builds a validated request, and the only modules that may name it: the pipeline, and where it is defined.
VALIDATORS = {"validate", "check_static", "check_inventory"}
VALIDATOR_HOMES = {PIPELINE, "core/request/validate.py"}
PARSERS = {"parse_request"}
PARSER_HOMES = {PIPELINE, "core/request/request.py"}
# Modules that parse tokens without validating them, and why that is no second pipeline.
PARSE_ONLY = {
    "magics/args.py": "srun options of a step (%srun): parsed to argv, never an allocation request",
    "demo.py": "the demo's fixed request explained in words; it is submitted as tokens through the pipeline",
    "__init__.py": "the front door names parse_request for type checkers (imported under TYPE_CHECKING only)",
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "labextension" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(PKG).as_posix()


def _uses(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` calls or imports one of ``names`` (also as an attribute or under another name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in names:
                found.append(f"{_rel(path)}:{node.lineno} calls {name}()")
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "parse"
                and isinstance(func.value, ast.Name)
                and func.value.id == "GpuRequest"
                and "parse_request" in names
            ):
                found.append(f"{_rel(path)}:{node.lineno} calls GpuRequest.parse()")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("slurmlab.core.request"):
            found += [f"{_rel(path)}:{node.lineno} imports {a.name}" for a in node.names if a.name in names]
    return found


def test_only_the_pipeline_validates_a_request() -> None:
    found = [f for p in _modules() if _rel(p) not in VALIDATOR_HOMES for f in _uses(p, VALIDATORS)]
    assert not found, (
        "a second place validates a request; call slurmlab.core.request.pipeline.check_request "
        "(or slurmlab.slurm.allocation.check_request, which asks the cluster) instead:\n  "
        + "\n  ".join(found)
    )


def test_only_the_pipeline_parses_salloc_tokens_into_a_request() -> None:
    allowed = PARSER_HOMES | set(PARSE_ONLY)
    found = [f for p in _modules() if _rel(p) not in allowed for f in _uses(p, PARSERS)]
    assert not found, (
        "a second place parses tokens into a request; use the pipeline "
        "(slurmlab.core.request.pipeline.check_request / read_request):\n  " + "\n  ".join(found)
    )


def test_the_magics_and_the_form_never_skip_validation() -> None:
    found = []
    for path in _modules():
        if _rel(path).split("/")[0] not in ("magics", "widgets", "server"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                found += [
                    f"{_rel(path)}:{node.lineno}"
                    for k in node.keywords
                    if k.arg == "validate" and isinstance(k.value, ast.Constant) and k.value.value is False
                ]
    assert not found, (
        "validate=False in the magics, widgets or server: hand Allocation.submit the checked "
        "request instead:\n  " + "\n  ".join(found)
    )


def test_the_guard_sees_a_second_pipeline(tmp_path: Path) -> None:
    """The guard itself: each way of writing a second pipeline is found."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from slurmlab.core.request.validate import validate as v\n"
        "from slurmlab.core.request import request\n"
        "r = request.parse_request(['--gpus=1'])\n"
        "r2 = GpuRequest.parse(['-n1'])\n"
        "v(r)\n"
    )
    global PKG
    saved, PKG = PKG, tmp_path
    try:
        found = _uses(bad, VALIDATORS) + _uses(bad, PARSERS)
    finally:
        PKG = saved
    assert any("imports validate" in f for f in found)
    assert any("calls parse_request()" in f for f in found)
    assert any("GpuRequest.parse()" in f for f in found)


def test_step_gpu_options_are_built_in_one_place() -> None:
    """``--gpus-per-task=`` / ``--gpus-per-node=`` rendered for a step: only in core.request.step_request."""
    homes = {
        "core/request/step_request.py",
        "core/request/request.py",
        "core/request/validate.py",
        "core/request/inventory_checks.py",
        "core/request/capacity_checks.py",
        "core/request/explain.py",
    }
    found = []
    for path in _modules():
        if _rel(path) in homes:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                head = next((v.value for v in node.values if isinstance(v, ast.Constant)), "")
                if isinstance(head, str) and head.startswith(
                    ("--gpus-per-task=", "--gpus-per-node=", "--gpus=")
                ):
                    found.append(f"{_rel(path)}:{node.lineno} builds {head!r}…")
    # salloc options the user chose (the form, the explorer, a kernel spec's request), not a step's
    allowed = {"widgets/form.py", "widgets/explorer.py", "provisioner/request.py"}
    found = [f for f in found if f.split(":")[0] not in allowed]
    assert not found, (
        "step GPU options built outside core.request.step_request.step_gpu_args:\n  " + "\n  ".join(found)
    )


# ---- the pipeline on the recorded clusters ---------------------------------------------------------------
def _counted(partitions: int) -> str:
    """How the note counts them: "(1 partition)", "(3 partitions)"."""
    return f"({partitions} partition{'' if partitions == 1 else 's'})"


def _cluster(version: str) -> tuple[ClusterInventory, tuple[int, ...]]:
    return golden_inventory(version)


def _golden_sallocs(version: str) -> list[tuple[str, bool, list[str]]]:
    """(file, accepted by that Slurm, salloc options) of every salloc recorded against the dgx-h100 cluster.
    Accepted: granted, or queued to wait (whatever ended the wait: --immediate, a SIGINT). The x* lines ran
    against the other, h200-mig sandbox."""
    out = []
    for line in golden_path(version, "commands.txt").read_text().splitlines():
        cols = line.split("\t")
        if (
            len(cols) < 3
            or not cols[1].startswith("rc=")
            or "salloc " not in cols[2]
            or cols[0].startswith("x")
        ):
            continue
        argv = shlex.split(cols[2])
        said = recorded(f"{version}/{cols[0]}")
        accepted = said.returncode == 0 or "queued and waiting" in said.stderr
        out.append((cols[0], accepted, argv[argv.index("salloc") + 1 :]))
    return out


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_the_pipeline_passes_what_slurm_accepted_and_refuses_what_it_refused(version: str) -> None:
    inventory, slurm_version = _cluster(version)
    seen = _golden_sallocs(version)
    assert len(seen) >= 10, seen
    assert any(not ok for _, ok, _ in seen) or version == "22.05"  # 22.05 still takes --uid
    for name, accepted, options in seen:
        if accepted:
            request = check_request(options, inventory, version=slurm_version)
            assert is_checked(request), name
            assert (
                request.checked is not None and _counted(len(inventory.partitions)) in request.checked.note()
            )
            continue
        with pytest.raises(RequestError) as info:
            check_request(options, inventory, version=slurm_version)
        assert info.value.hint, (name, info.value)  # the error names a fix, as every slurmlab error does
        if isinstance(info.value, RequestProblems):
            assert all(p.message and p.hint for p in info.value.problems), name


def _shared_cluster(version: str) -> tuple[ClusterInventory, tuple[int, ...]]:
    from slurmlab.core.slurm.parse_json import parse_nodes_json, parse_partitions_json
    from slurmlab.core.slurm.parse_text import parse_scontrol_nodes, parse_scontrol_partitions
    from slurmlab.slurm.queries import build_inventory

    d = require_shared("slurm", version)
    if version == "22.05":  # no scontrol --json there
        nodes = parse_scontrol_nodes((d / "s08_scontrol_show_node_d.txt").read_text())
        parts = parse_scontrol_partitions((d / "s16_scontrol_show_partition.txt").read_text())
    else:
        nodes = parse_nodes_json(json.loads((d / "s07_scontrol_show_node.json").read_text()))
        parts = parse_partitions_json(json.loads((d / "s09_scontrol_show_partition.json").read_text()))
    said = (d / "00_sinfo_version.txt").read_text().split()[-1]
    return build_inventory(nodes, parts), tuple(int(x) for x in said.split("."))


def _recorded_sallocs(version: str) -> list[tuple[str, int | None, list[str]]]:
    """(fixture name, exit code, salloc options) of every salloc line recorded against the cluster."""
    out = []
    for line in require_shared("slurm", version, "commands.txt").read_text().splitlines():
        cols = line.split("\t")
        if len(cols) < 3 or not cols[1].startswith("rc=") or "salloc " not in cols[2]:
            continue
        argv = shlex.split(cols[2])
        rc = cols[1][3:]
        out.append((cols[0], int(rc) if rc.isdigit() else None, argv[argv.index("salloc") + 1 :]))
    return out


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_pipeline_refuses_what_the_real_slurm_refused(version: str) -> None:
    """Extra, on the shared capture (its refusals e03-e10 are not in the golden files).
    Granted (rc 0), left pending (124) or refused only for want of free GPUs (--immediate): checked and
    passed. Every other salloc the real Slurm refused: refused here first, each problem with its fix."""
    inventory, slurm_version = _shared_cluster(version)
    seen = _recorded_sallocs(version)
    assert len(seen) >= 10, seen
    for name, rc, options in seen:
        valid = rc in (0, 124) or any(o.startswith("--immediate") for o in options)
        if valid:
            request = check_request(options, inventory, version=slurm_version)
            assert is_checked(request), name
            assert (
                request.checked is not None and _counted(len(inventory.partitions)) in request.checked.note()
            )
            continue
        with pytest.raises(RequestProblems) as info:
            check_request(options, inventory, version=slurm_version)
        assert all(p.message and p.hint for p in info.value.problems), name
        assert info.value.hint, name  # the error names a fix, as every slurmlab error does


@pytest.mark.parametrize(
    ("line", "wrong", "fix"),
    [
        ("--gres=gpu:nonexistent:1", "no nonexistent GPUs", "h100"),  # unknown GRES type: the types offered
        ("-p gpu --gpus=a100:1", "no a100 GPUs", "h100"),
        ("--gres=fpga:1", "offers no 'fpga' GRES", "gpu, shard"),  # unknown GRES name
        (
            "-p mig --gpus=1g.18gb:1 -t 2-00:00:00",
            "time limit",
            "--time=1-00:00:00",
        ),  # the shared cluster's mig
        ("--gpus=two", "not a GPU count", "--gpus=2"),  # malformed option
        ("-t 5:99:00", "out of range", "6:39:00"),
        ("--gpu-bind=map:0,1", "not a GPU binding", "map_gpu"),
        ("--gres=gpu:h100:", "empty field", "name[:type][:count]"),
        ("--nodes", "needs a value", "--nodes=VALUE"),
        ("--gpus=1 --gres=shard:2", "both whole (gpu) and shared", "never both"),
    ],
)
def test_a_wrong_request_is_a_request_error_naming_the_fix(line: str, wrong: str, fix: str) -> None:
    # the recorded cluster has no partition with a time limit: that case needs the shared capture's
    inventory, version = _shared_cluster("22.05") if "-p mig" in line else _cluster("22.05")
    with pytest.raises(RequestError) as info:
        check_request(shlex.split(line), inventory, version=version)
    text = str(info.value)
    assert wrong in text and fix in text, text


def test_hostile_free_text_stays_one_argument_and_is_checked() -> None:
    inventory, version = _cluster("24.11")
    name = "x\nUserId=root(0) JobState=RUNNING; rm -rf ~"
    request = check_request(
        ["-J", name, "--comment=GRES=gpu:h100:8(IDX:0-7)", "-p", "gpu", "--gpus=1"],
        inventory,
        version=version,
    )
    assert request.job_name == name and f"--job-name={name}" in request.to_argv()
    assert is_checked(request)


def test_a_command_in_an_allocation_request_is_refused_with_its_fix() -> None:
    with pytest.raises(CommandInRequest) as info:
        read_request(["--gpus=1", "hostname", "-f"])
    assert info.value.command == ("hostname", "-f")
    assert "takes no command" in info.value.message and "srun" in (info.value.hint or "")
    with pytest.raises(RequestError, match="split the line first"):
        check_request("--gpus=1", None)  # type: ignore[arg-type]


def test_checked_marks_the_request_as_it_was_checked() -> None:
    inventory, version = _cluster("22.05")
    request = check_request(["--gpus=2", "-t", "30"], inventory, version=version)
    assert request.checked is not None
    assert request.checked.note() == "checked against the cluster (1 partition), Slurm 22.05.8"
    # a changed copy is not the request that was checked
    changed = dataclasses.replace(request, gpus=GpuCount(99))
    assert not is_checked(changed)
    with pytest.raises(RequestProblems, match="only 16 GPUs"):
        check_request(changed, inventory, version=version)
    # a model built by hand goes through the same checks
    assert not is_checked(GpuRequest(gpus=GpuCount(1)))
    assert is_checked(check_request(GpuRequest(gpus=GpuCount(1)), inventory))


def test_without_a_cluster_only_the_request_itself_is_checked() -> None:
    request = check_request(
        ["--gpus=2", "--gpu-freq=high", "--gres-flags=one-task-per-sharing"],
        None,
        why_no_inventory="slurmctld is not responding",
    )
    assert request.checked is not None and not request.checked.against_cluster
    assert request.checked.note() == "not checked against the cluster: slurmctld is not responding"
    assert not is_checked(request)
    with pytest.raises(RequestProblems, match="mutually exclusive"):
        check_request(["--cpus-per-gpu=2", "--cpus-per-task=2"], None)
    # checked again against the cluster: each warning once
    again = check_request(request, _cluster("22.05")[0])
    assert len(again.warnings) == len(set(again.warnings)) and again.warnings


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
@pytest.mark.parametrize(
    "line", ["-N 2 --gpus=4:1 -t 30", "-N 2 --gres=gpu:4:1 -t 30", "-N 2 --gpus-per-node=4:1 -t 30"]
)
def test_a_gpu_count_written_as_a_type_is_named_against_a_real_cluster(version: str, line: str) -> None:
    """Issue 28 point 4, on the recorded 2-node, 16-GPU cluster: the article's ``--gpus=4:1`` was answered
    "partition 'gpu' has no 4 GPUs" (Slurm's [type:]count made 4 a type); the pipeline now says so, and
    offers the spelling that asks for four GPUs on each node."""
    inventory, slurm_version = golden_inventory(version)
    nodes = {n.name: n for part in inventory.partitions for n in part.nodes}
    assert sum(n.gpu_count() for n in nodes.values()) == 16
    with pytest.raises(RequestError) as info:
        check_request(shlex.split(line), inventory, version=slurm_version)
    err = info.value
    assert "'4' would be a GPU type, not a number of GPUs" in err.message and "has no 4 GPUs" not in str(err)
    assert err.hint is not None and "--gpus-per-node=4" in err.hint
    assert check_request(
        ["-N", "2", "--gpus-per-node=4", "-t", "30"], inventory, version=slurm_version
    ).checked
