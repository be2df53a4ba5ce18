"""Reading salloc/srun-style tokens into a GpuRequest, and rendering it back."""

from __future__ import annotations

import shlex

import pytest

from slurmlab.core.request.request import (
    GpuBind,
    GpuCount,
    GpuRequest,
    GresSpec,
    Memory,
    NodeCount,
    RequestProblems,
    TimeLimit,
    parse_request,
)
from slurmlab.errors import RequestError


def p(line: str) -> GpuRequest:
    return parse_request(shlex.split(line))


# --- the fixture workloads (commands.txt) read as expected


def test_fixture_w02_line() -> None:
    r = p(
        "-J gpn2 -t 60 -N 2 --ntasks-per-node=2 --gpus-per-node=h100:1 --gpu-bind=closest "
        "--gres-flags=enforce-binding"
    )
    assert r.job_name == "gpn2"
    assert r.time == TimeLimit(3600)
    assert r.nodes == NodeCount(2)
    assert r.ntasks_per_node == 2
    assert r.gpus_per_node == GpuCount(1, "h100")
    assert r.gpu_bind == GpuBind("closest")
    assert r.gres_flags == ("enforce-binding",)
    assert r.warnings == ()


def test_fixture_w05_mig_line() -> None:
    r = p("-J mig3g -t 60 -p mig --gpus=3g.71gb:1 --cpus-per-gpu=4 --mem-per-gpu=8G")
    assert r.partition == "mig"
    assert r.gpus == GpuCount(1, "3g.71gb")
    assert r.cpus_per_gpu == 4
    assert r.mem_per_gpu == Memory(8 * 1024 * 1024)


@pytest.mark.parametrize(
    "tokens",
    [["-N2"], ["-N", "2"], ["--nodes=2"], ["--nodes", "2"]],
)
def test_short_long_attached_and_separate_forms_agree(tokens: list[str]) -> None:
    assert parse_request(tokens).nodes == NodeCount(2)


@pytest.mark.parametrize(
    ("line", "field", "value"),
    [
        ("-n 8", "ntasks", 8),
        ("--ntasks=8", "ntasks", 8),
        ("--tasks-per-node 3", "ntasks_per_node", 3),
        ("-c4", "cpus_per_task", 4),
        ("-G 2", "gpus", GpuCount(2)),
        ("-G h100:2", "gpus", GpuCount(2, "h100")),
        ("--gpus-per-task=1", "gpus_per_task", GpuCount(1)),
        ("--gpus-per-socket a100:2", "gpus_per_socket", GpuCount(2, "a100")),
        ("-N 1-4", "nodes", NodeCount(1, 4)),
        ("-p gpu", "partition", "gpu"),
        ("-A proj", "account", "proj"),
        ("-q high", "qos", "high"),
        ("-w node[1-2]", "nodelist", "node[1-2]"),
        ("-x node3", "exclude", "node3"),
        ("-C 'h100&nvlink'", "constraint", "h100&nvlink"),
        ("--reservation=r1", "reservation", "r1"),
        ("--gpu-freq=high,memory=low", "gpu_freq", "high,memory=low"),
        ("--comment 'a b'", "comment", "a b"),
        ("--mpi=pmi2", "mpi", "pmi2"),
        ("--exclusive", "exclusive", ""),
        ("--exclusive=user", "exclusive", "user"),
        ("--cpu-bind=verbose,map_cpu:0,1", "cpu_bind", "verbose,map_cpu:0,1"),
        ("--mem=0", "mem", Memory(0)),
        ("--mem=512", "mem", Memory(512 * 1024)),
        ("--mem-per-cpu=2000M", "mem_per_cpu", Memory(2000 * 1024)),
        ("--mem 1T", "mem", Memory(1024**3)),
        ("--gpu-bind=verbose,map_gpu:0,1*2", "gpu_bind", GpuBind("map_gpu", "0,1*2", verbose=True)),
        ("--gpu-bind=mask_gpu:0x1,0x2", "gpu_bind", GpuBind("mask_gpu", "0x1,0x2")),
        ("--gpu-bind=single:2", "gpu_bind", GpuBind("single", "2")),
        ("--gpu-bind=per_task:1", "gpu_bind", GpuBind("per_task", "1")),
        ("--gpu-bind=none", "gpu_bind", GpuBind("none")),
        (
            "--gres-flags=disable-binding,one-task-per-sharing",
            "gres_flags",
            ("disable-binding", "one-task-per-sharing"),
        ),
    ],
)
def test_each_option(line: str, field: str, value: object) -> None:
    assert getattr(p(line), field) == value


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        ("gpu", (GresSpec("gpu"),)),
        ("gpu:2", (GresSpec("gpu", None, 2),)),
        ("gpu:h100", (GresSpec("gpu", "h100"),)),
        ("gpu:1g.18gb:2", (GresSpec("gpu", "1g.18gb", 2),)),
        ("shard:4", (GresSpec("shard", None, 4),)),
        ("mps:h100:50", (GresSpec("mps", "h100", 50),)),
        (
            "gpu:a:1,gpu:b:2,fpga:1",
            (GresSpec("gpu", "a", 1), GresSpec("gpu", "b", 2), GresSpec("fpga", None, 1)),
        ),
    ],
)
def test_gres_lists(text: str, specs: tuple[GresSpec, ...]) -> None:
    assert p(f"--gres={text}").gres == specs


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90 * 60),
        ("0", 0),
        ("5:30", 5 * 60 + 30),
        ("1:30:00", 5400),
        ("2-0", 2 * 86400),
        ("1-12", 86400 + 12 * 3600),
        ("1-2:03", 86400 + 2 * 3600 + 3 * 60),
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
        ("200:00:00", 200 * 3600),
        ("INFINITE", None),
        ("unlimited", None),
    ],
)
def test_all_slurm_time_forms(text: str, seconds: int | None) -> None:
    assert p(f"-t {text}").time == TimeLimit(seconds)


def test_time_renders_canonically() -> None:
    assert TimeLimit(86400 + 3723).render() == "1-01:02:03"
    assert TimeLimit(59).render() == "00:00:59"
    assert TimeLimit(None).render() == "INFINITE"


def test_to_argv_uses_canonical_long_forms() -> None:
    r = p("-N2 -n4 -c 8 -G h100:4 -t 1:00:00 -p gpu --exclusive --mem=16G -- python train.py")
    assert r.to_argv() == [
        "--partition=gpu",
        "--time=01:00:00",
        "--nodes=2",
        "--ntasks=4",
        "--cpus-per-task=8",
        "--gpus=h100:4",
        "--mem=16G",
        "--exclusive",
        "--",
        "python",
        "train.py",
    ]
    assert parse_request(r.to_argv()) == r


# --- unknown and unmodelled options are kept


def test_unknown_options_are_kept_in_order_with_a_warning() -> None:
    r = p("--no-shell --frobnicate=3 -J x --zap --immediate=5 -o out.txt")
    assert r.extra == (
        ("--no-shell",),
        ("--frobnicate=3",),
        ("--zap",),
        ("--immediate=5",),
        ("-o", "out.txt"),
    )
    assert r.job_name == "x"
    assert len(r.warnings) == 2
    assert "--frobnicate=3" in r.warnings[0] and "--zap" in r.warnings[1]
    assert r.to_argv()[-6:] == ["--no-shell", "--frobnicate=3", "--zap", "--immediate=5", "-o", "out.txt"]


def test_unknown_option_followed_by_a_word_takes_it_as_its_value() -> None:
    r = p("--foo bar -N 1")
    assert r.extra == (("--foo", "bar"),)
    assert r.nodes == NodeCount(1)
    assert "'bar' taken as its value" in r.warnings[0]


def test_command_after_double_dash_or_first_word() -> None:
    assert p("-N 1 -- -weird arg").command == ("-weird", "arg")
    assert p("-N 1 hostname -s").command == ("hostname", "-s")
    assert parse_request(["-N", "1", "--", "-weird"]).to_argv() == ["--nodes=1", "--", "-weird"]


def test_repeated_option_last_wins_with_a_warning() -> None:
    r = p("-N 2 --nodes=3")
    assert r.nodes == NodeCount(3)
    assert any("--nodes given more than once" in w for w in r.warnings)


def test_warnings_do_not_change_equality() -> None:
    assert p("-N 2 -N 3") == p("-N 3")


# --- malformed values: RequestError naming the value and the fix


@pytest.mark.parametrize(
    ("line", "in_message", "in_hint"),
    [
        ("--gpus=two", "'two' is not a GPU count", "--gpus=h100:2"),
        ("--gpus=h100", "'h100' is not a GPU count", "--gpus=h100:1"),
        ("--gpus=h100:x", "'x' is not a whole number", "--gpus=2"),
        ("--gpus-per-node=a:b:1", "too many ':'", "--gpus-per-node=h100:2"),
        ("-t 5:99:00", "99 minutes is out of range", "6:39:00"),
        ("-t 10:75", "75 seconds is out of range", "minutes:seconds"),
        ("-t 1-25", "25 hours is out of range", "days-hours"),
        ("-t soon", "'soon' is not a Slurm time".replace("'soon'", "--time=soon"), "hours:minutes:seconds"),
        ("-t 1:2:3:4", "is not a Slurm time", "--time=1:30:00"),
        ("--gres=gpu::2", "--gres=gpu::2 has an empty field", "name[:type][:count]"),
        ("--gres=gpu:h100:two", "'two' is not a whole number", "--gres=gpu:h100:2"),
        ("--gres=gpu:a:b:1", "too many ':' fields", "name[:type][:count]"),
        ("--gres=gpu:1,,shard:2", "has an empty item", "extra ','"),
        ("--gres=2", "'2' is not a GRES name", "resource name"),
        ("--gpu-bind=bogus", "'bogus' is not a GPU binding", "closest"),
        ("--gpu-bind=map:0,1", "'map' is not a GPU binding", "map_gpu:<list>"),
        ("--gpu-bind=map_gpu:a", "'a' is not a GPU index", "map_gpu:0,1"),
        ("--gpu-bind=single", "single needs a value", "single:1"),
        ("--gpu-bind=closest:2", "closest takes no value", "--gpu-bind=closest"),
        ("--gpu-bind=verbose", "names no binding", "verbose,closest"),
        ("--gres-flags=enforce", "'enforce' is not a GRES flag", "enforce-binding"),
        ("--cpu-bind=tight", "is not a CPU binding", "cores"),
        ("--mem=8X", "--mem=8X is not a memory size", "--mem=8G"),
        ("-N 0", "must be at least 1", "--nodes=2"),
        ("-N 4-2", "maximum 2 is below the minimum 4", "--nodes=2-4"),
        ("-N 1,2", "count or a min-max range", "--nodes=1-4"),
        ("-n -3", "'-3' is not a whole number", "--ntasks=2"),
        ("--exclusive=all", "not an exclusivity mode", "--exclusive=user"),
        ("--partition=", "--partition is empty", "--partition="),
        ("-p", "-p needs a value", "-p VALUE"),
        ("--gpus", "--gpus needs a value", "--gpus=VALUE"),
    ],
)
def test_malformed_values(line: str, in_message: str, in_hint: str) -> None:
    with pytest.raises(RequestError) as info:
        p(line)
    err = info.value
    assert in_message in err.message
    assert err.hint is not None and in_hint in err.hint


@pytest.mark.parametrize(
    ("line", "form", "fix"),
    [
        ("--gpus=4:1", "[type:]count", "--gpus-per-node=4; for 4 in all, --gpus=4"),
        ("--gres=gpu:4:1", "name[:type][:count]", "--gpus-per-node=4; for 4 in all, --gpus=4"),
        ("--gpus-per-task=2:1", "[type:]count", "write --gpus-per-task=2"),
    ],
)
def test_a_number_where_slurm_reads_a_gpu_type_is_named_as_such(line: str, form: str, fix: str) -> None:
    """Issue 28 point 4: the article's --gpus=4:1 means "4 GPUs" to its reader but "type 4, one GPU" to
    Slurm; before, it passed the parser and the partition check said "partition 'gpu' has no 4 GPUs"."""
    with pytest.raises(RequestError) as info:
        p(line)
    number = line.split("=")[1].split(":")[-2]
    assert info.value.message == (
        f"{line}: Slurm reads {form}, so {number!r} would be a GPU type, not a number of GPUs"
    )
    assert info.value.hint is not None and info.value.hint.endswith(fix)
    assert p("--gpus=h100:1").gpus is not None  # a named type is still a type


def test_every_malformed_value_is_reported_at_once() -> None:
    with pytest.raises(RequestProblems) as info:
        p("--gpus=two --gres=gpu::2 -t 5:99:00 -N 1")
    problems = info.value.problems
    assert [pr.message.split(":")[0].split(" ")[0] for pr in problems] == [
        "--gpus=two",
        "--gres=gpu",
        "--time=5",
    ]
    assert "3 problems" in str(info.value)
    assert "--gpus=two" in str(info.value) and "5:99:00" in str(info.value)


def test_a_string_is_refused() -> None:
    with pytest.raises(RequestError, match="list of tokens"):
        parse_request("-N 2")  # type: ignore[arg-type]
