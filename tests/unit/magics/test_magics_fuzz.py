"""Property-based fuzzing of every magic (issue 10): random and adversarial lines through a real shell.

Properties, for every line: only UsageError comes out of the magic (IPython shows it as one line,
never a traceback from inside slurmlab); no line hangs (a generous per-line guard); and no line
reaches a shell: lines try to create a marker file through shell syntax (``;touch M``, ``$(touch
M)``, backquotes, ``>M``, pipes) and the marker must never exist.

The offline part (~2,150 lines) runs with a runner that fails every Slurm command at once, so the
parsing and validation path is fuzzed without submitting anything; the experiments' launcher is
replaced by a recorder that checks what reached it. The sandbox part (a few hundred lines) sends
the read-only magics and hostile job ids to the real Slurm and checks that no job or poller watch
is left behind. Hypothesis runs derandomized: the same lines on every run.
"""

from __future__ import annotations

import math
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError
from profiles import scaled

MARKER = "slurmlab-fuzz-pwned"
# A line that any slurmlab code path takes longer than this to refuse is taken for a hang; real
# lines take milliseconds (the bound is a hang guard, not a speed target).
HANG_GUARD_S = 20.0

OFFLINE_EXAMPLES = {
    ("line", "salloc"): 300,
    ("line", "srun"): 300,
    ("cell", "srun"): 200,
    ("line", "scancel"): 250,
    ("line", "squeue"): 250,
    ("line", "sinfo"): 200,
    ("line", "slurm"): 200,
    ("line", "gpu_timeslice"): 250,
    ("line", "gpu_isolation"): 200,
}
assert sum(OFFLINE_EXAMPLES.values()) >= 2000

HOSTILE_NAME = "y UserId=root(0) Nodes=n[1-1000]x[1-1001] GRES=gpu:h100:8(IDX:0-7)"

BAD_JOB_IDS = [
    "-v",
    "0",
    "00",
    "1\n",
    " 1",
    "1_",
    "_1",
    "1_-1",
    "+1",
    "\uff11",
    "\u00b2",
    "1e3",
    "0x10",
    "-1",
    "99999999999",
    "4294967296",
    "1,2",
    "None",
    "",
    "1 2",
    "9999999_x",
    "1.0",
    "1/2",
    "*",
]


def _shell_fragments(marker: Path) -> list[str]:
    """Shell syntax that, run by any shell, creates the marker (absolute, or relative to the cwd)."""
    m = str(marker)
    return [
        f";touch {m}",
        f"$(touch {m})",
        f"`touch {m}`",
        f"|touch {m}",
        f"&&touch {m}",
        f"||touch {m}",
        f">{m}",
        f">>{m}",
        f"a;touch${{IFS}}{m}",
        f"';touch {m};'",
        f'";touch {m};"',
        f"&touch {m}&",
        f"\ntouch {m}",
        f">{MARKER}",
        f";touch {MARKER}",
        f"$(touch {MARKER})",
        f"{m}<<EOF",
    ]


COMMON = [
    "'",
    '"',
    "'unbalanced",
    '"unbalanced',
    "''",
    '""',
    "\\",
    "\\\\",
    "x\\",
    "$",
    "$$",
    "$n",
    "$$n",
    "$undefined_xyz",
    "${n}",
    "{}",
    "{n}",
    "{undefined_xyz}",
    "{{",
    "}}",
    "{",
    "}",
    "{0}",
    "{n!r}",
    "{n:>5}",
    "'$n'",
    '"$n"',
    ";",
    "&&",
    "||",
    "|",
    "&",
    "`",
    "$(",
    ")",
    "(",
    "<",
    ">",
    ">>",
    "*",
    "?",
    "~",
    "#",
    "!",
    "!!",
    "%",
    "%%",
    ";rm -rf /",
    "rm -rf ~",
    "--",
    "-",
    "--=",
    "=",
    "==",
    "-=",
    "-v",
    "-vvvv",
    "-h",
    "--help",
    "--version",
    "--jobid",
    "--jobid=",
    "--jobid=-v",
    "--jobid=0",
    "--jobid=1\n",
    "--jobid=99999999999",
    "--jobid 7",
    "-J",
    "-J 'y UserId=root(0)'",
    f"--job-name='{HOSTILE_NAME}'",
    "--comment='GRES=gpu:h100:8(IDX:0-7)'",
    "-n",
    "-N",
    "-N2",
    "-n 2",
    "--gpus=",
    "--gpus=2",
    "--gpus=-1",
    "--gpus=h100:99999999999999",
    "--gres=gpu:1",
    "--gres=shard:2",
    "--gres=",
    "-t",
    "-t 99999999999",
    "--time=-1",
    "--time=1-",
    "-p",
    "--partition=",
    "-p ''",
    "-w node[1-1000]x[1-1000]",
    "--nodelist=n[1-1000]x[1-1000]y[1-1000]",
    "--mem=1e308",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "00",
    "99999999999999999999999",
    "9" * 5000,
    "-" * 50,
    "\x00",
    "a\x00b",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u202e",
    "\u200b",
    "\ufeff",
    "日本語",
    "🙂",
    "Ω≈ç√",
    "\ud800",
    "\udc80",
    "\U0010ffff",
    "   ",
    "\t",
    "\r",
    "\n",
    "\x0b",
    "x" * 300_000,
    "y" * 140_000,
    "z " * 1_200,
    "$" * 2_100,
    "'" * 3_000,
]

SPECIFIC: dict[str, list[str]] = {
    "salloc": [
        "--dry-run",
        "--dry-run",
        "--attach",
        "--attach 0",
        "--attach=-v",
        "--attach=7",
        "--form",
        "--gpus-per-node=h100:4",
        "--gpu-bind=closest",
        "--gpus-per-task=1",
        "-c",
        "-c 0",
        "--exclusive",
        "--comment=x",
        "--no-shell",
        "--wrap=id",
        "--bogus-flag",
        "-A",
        "--account=",
    ],
    "srun": [
        "--label",
        "-l",
        "--python",
        "--interpreter",
        "--interpreter=/bin/sh",
        "--timeout",
        "--timeout=nan",
        "--timeout=0",
        "--timeout=1e400",
        "-n2",
        "--gpus-per-task=1",
        "hostname",
        "bash -c",
        "echo",
    ],
    "scancel": [
        "7",
        "7_1",
        "12 13",
        "0",
        "-v",
        "--signal=KILL",
        "-u root",
        "--me",
        "1_-1",
        "+7",
        "7 7",
        "42",
        "4294967295",
        "1_4294967296",
    ],
    "squeue": [
        "--all",
        "-a",
        "-u",
        "-u root",
        "--user=root",
        "-u ''",
        "-u 0",
        "-u -v",
        "--watch",
        "-w",
        "--user=nobody_xyz",
        "-o %i",
        "--format=%all",
        "-t all",
    ],
    "sinfo": ["-p", "-p gpu", "--partition=debug", "-p ''", "-N", "--json", "-o %all"],
    "slurm": [
        "status",
        "sandbox",
        "sandbox status",
        "use",
        "up",
        "down",
        "sandbox up",
        "sandbox down",
        "use /nonexistent/slurm.conf",
        "use .",
        "use ''",
        "--nodes",
        "--nodes 0",
        "--nodes -5",
        "--dir",
        "--dir /nonexistent/sb",
        "--dir ''",
        "tiny",
        "../../../etc",
        "sandbox status ../../etc",
    ],
    "gpu_timeslice": [
        "--local",
        "--local",
        "--procs",
        "--procs 0",
        "--procs 100000",
        "-n 2",
        "--duration",
        "--duration nan",
        "--duration 1e308",
        "-d 0.01",
        "--backend",
        "--backend cpu",
        "--backend cupy",
        "--backend gpu",
        "--cores",
        "--cores 0",
        "--cores 0,1",
        "--cores \u00b2",
        "--cores 1,99999999",
        "--cores 0-",
        "--cores 99999",
        "--device -1",
        "--device 99999",
        "--nice -99",
        "--nice 5",
    ],
    "gpu_isolation": [
        "--tasks",
        "--tasks 0",
        "-n 99999",
        "--backend cpu",
        "--timeslice",
        "-- -n2",
        "-- --gpus-per-task=1",
        "--jobid=7",
    ],
}

CELL_BODIES = [
    "",
    "   \n",
    "echo hi\n",
    "hostname",
    "print(1)\n",
    "\x00",
    "echo a\x00b\n",
    "\x1b[1m",
    "\udc80",
    "\ud800",
    "z" * 140_000,
    "'",
    '"',
    "$(",
    "`",
    "{n}",
    "$n",
    "\\",
]


# Valid beginnings, so that the hostile part meets the deeper checks too, not only the first one.
PREFIXES: dict[str, list[str]] = {
    "salloc": [
        "",
        "--dry-run ",
        "--dry-run --gpus=1 ",
        "--dry-run -N1 --gpus-per-node=h100:2 -t 10 ",
        "--gpus=1 ",
    ],
    "srun": ["", "--jobid=7 ", "-n2 ", "--label -n1 ", "-- "],
    "scancel": ["", "7 ", "7_1 8 "],
    "squeue": ["", "--all ", "-u root "],
    "sinfo": ["", "-p "],
    "slurm": ["", "status ", "sandbox status ", "use ", "sandbox ", "sandbox status --dir "],
    "gpu_timeslice": ["", "--local --backend cpu ", "--local -d 0.01 -n 2 --backend cpu ", "--jobid=7 "],
    "gpu_isolation": ["", "--jobid=7 ", "--tasks 2 -- "],
}


def _line_strategy(pieces: list[str], prefixes: list[str]) -> st.SearchStrategy[str]:
    # control characters and surrogates come from the curated pieces: drawn at random they would
    # stop most lines at the first check
    random_text = st.text(
        st.characters(exclude_characters="{}", exclude_categories=("Cc", "Cs")), max_size=12
    )
    numbers = st.one_of(st.integers(-(10**30), 10**30).map(str), st.floats().map(repr))
    fragment = st.one_of(st.sampled_from(pieces), st.sampled_from(pieces), random_text, numbers)
    joint = st.sampled_from([" ", " ", " ", "", "=", "\t", ","])
    tail = st.lists(st.tuples(fragment, joint), max_size=5).map(
        lambda parts: "".join(f + j for f, j in parts)
    )
    return st.tuples(st.sampled_from(prefixes), tail).map("".join)


class Fuzzer:
    """Drives one magic with many lines and checks the properties after each."""

    def __init__(self, ip: Any, marker: Path, reset: Callable[[], None]) -> None:
        self.ip = ip
        self.marker = marker
        self.reset = reset
        self.count = 0
        self.refused = 0
        self.slowest = (0.0, "")

    def drive(self, kind: str, name: str, line: str, cell: str | None = None) -> None:
        self.count += 1
        start = time.monotonic()
        result: Any = None
        try:
            if kind == "cell":
                result = self.ip.run_cell_magic(name, line, cell or "")
            else:
                result = self.ip.run_line_magic(name, line)
        except UsageError as exc:
            self.refused += 1
            text = str(exc)
            assert "Traceback" not in text, f"%{name} {line[:200]!r}: {text[:500]}"
        except Exception as exc:
            raise AssertionError(
                f"%{'%' if kind == 'cell' else ''}{name} {line[:300]!r}"
                + (f" (cell {cell[:100]!r})" if cell is not None else "")
                + f" raised {type(exc).__name__}: {str(exc)[:500]}"
            ) from exc
        finally:
            close = getattr(result, "close", None)
            if callable(close):
                close()  # a --watch monitor or a --form: stop its threads
            self.reset()
        took = time.monotonic() - start
        if took > self.slowest[0]:
            self.slowest = (took, line[:120])
        assert took < HANG_GUARD_S, f"%{name} {line[:200]!r} took {took:.1f} s"
        for where in (self.marker, Path.cwd() / MARKER):
            assert not where.exists(), f"%{name} {line[:300]!r} ran a shell: {where} exists"


FUZZ_SETTINGS = settings(
    derandomize=True,  # the same lines on every run: a failure is reproducible from the log
    database=None,
    deadline=None,
    print_blob=False,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def fuzz_env(
    ip: Any, offline_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Fuzzer]:
    """The shell with the experiment magics, no Slurm, no sandbox start/stop, no real experiment run."""
    from slurmlab.errors import SandboxError
    from slurmlab.experiments import timeslice
    from slurmlab.magics import session
    from slurmlab.magics.experiments import ExperimentMagics
    from slurmlab.sandbox.control import Sandbox
    from slurmlab.slurm.runner import set_runner

    ip.register_magics(ExperimentMagics)
    monkeypatch.chdir(tmp_path)
    ip.user_ns["n"] = 3

    def no_sandbox(*_a: Any, **_k: Any) -> Any:
        raise SandboxError("the fuzz test starts and stops no sandbox")

    monkeypatch.setattr(Sandbox, "up", classmethod(no_sandbox))
    monkeypatch.setattr(Sandbox, "down", no_sandbox)

    def fake_measure(plan: Any, *_a: Any, **_kw: Any) -> Any:
        # what reaches the launcher was validated: a bounded number of workers for a finite time
        assert isinstance(plan.procs, int) and 1 <= plan.procs <= 64, plan.procs
        assert math.isfinite(plan.duration) and 0 < plan.duration <= 3600, plan.duration
        assert plan.backend in ("cpu", "cupy")
        return types.SimpleNamespace(meta={})

    monkeypatch.setattr(timeslice, "measure", fake_measure)

    def reset() -> None:
        set_runner(offline_runner)  # %slurm use may have switched it
        s = session.get_session()
        s.sandbox = None
        s.default = None
        s.allocations.clear()

    fuzzer = Fuzzer(ip, tmp_path / MARKER, reset)
    try:
        yield fuzzer
    finally:
        ip.user_ns.pop("n", None)
        for name in ("gpu_timeslice", "gpu_isolation"):
            ip.magics_manager.magics["line"].pop(name, None)
    # nothing was ever submitted: the runner failed every command, salloc included
    assert not any(argv and argv[0] in ("salloc", "sbatch", "srun") for argv in offline_runner.seen)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("kind", "name"), list(OFFLINE_EXAMPLES))
def test_fuzz_every_magic_offline(fuzz_env: Fuzzer, kind: str, name: str, tmp_path: Path) -> None:
    examples = scaled(OFFLINE_EXAMPLES[(kind, name)], floor=20)
    pieces = COMMON + SPECIFIC[name] + _shell_fragments(tmp_path / MARKER)
    lines = _line_strategy(pieces, PREFIXES[name])

    if kind == "cell":
        bodies = st.one_of(
            st.sampled_from(CELL_BODIES + _shell_fragments(tmp_path / MARKER)), st.text(max_size=40)
        )

        @settings(FUZZ_SETTINGS, max_examples=examples)
        @given(lines, bodies)
        def one_cell(line: str, body: str) -> None:
            fuzz_env.drive("cell", name, line, body)

        one_cell()
    else:

        @settings(FUZZ_SETTINGS, max_examples=examples)
        @given(lines)
        def one_line(line: str) -> None:
            fuzz_env.drive("line", name, line)

        one_line()
    print(
        f"\n%{name} ({kind}): {fuzz_env.count} lines, {fuzz_env.refused} refused, "
        f"slowest {fuzz_env.slowest[0]:.2f} s"
    )
    assert fuzz_env.count >= examples * 0.95
    assert fuzz_env.refused > 0  # the lines were hostile enough to be refused at all


def test_fuzzed_lines_show_as_one_line_not_a_traceback(
    fuzz_env: Fuzzer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through run_cell, as a notebook runs them: a message, never a traceback."""
    m = tmp_path / MARKER
    cells = [
        "%srun --jobid=-v hostname",
        "%salloc --attach 0",
        f"%squeue -u a;touch {m}",
        "%scancel 0 -v",
        "%sinfo -p 'unclosed",
        "%srun echo a\x00b",
        "%salloc --dry-run 'y UserId=root(0)'",
        f"%slurm use $(touch {m})",
        "%gpu_isolation --jobid=1_",
        "%gpu_timeslice --local --procs 100000",
        "%salloc -J 'y UserId=root(0)' --gpus=1",
        f"%%srun\necho $(touch {m}) \x00",
        "%srun " + "$" * 2_100,
    ]
    for cell in cells:
        result = fuzz_env.ip.run_cell(cell)
        captured = capsys.readouterr()
        out = captured.out + captured.err
        assert isinstance(result.error_in_exec, UsageError), (cell[:80], result.error_in_exec)
        assert "Traceback" not in out and "UsageError: " in out, (cell[:80], out[:800])
        assert not m.exists()


# ---- against the real sandbox ----------------------------------------------------------------------
SANDBOX_EXAMPLES = {"squeue": 90, "sinfo": 60, "srun": 60, "salloc": 30, "gpu_isolation": 30}


def _sandbox_lines(name: str, marker: Path) -> st.SearchStrategy[str]:
    hostile_ids = st.sampled_from(
        BAD_JOB_IDS + ["99999990", "99999990_1", f"1;touch {marker}", f"$(touch {marker})"]
    )
    shellish = st.sampled_from(_shell_fragments(marker) + ["hostname", "--", "-n1", "'a b'", "\\"])
    if name == "squeue":
        users = st.one_of(
            st.sampled_from(
                [
                    "root",
                    "0",
                    "nobody",
                    "''",
                    "-v",
                    "a;b",
                    "日本",
                    "$n",
                    "{n}",
                    "99999",
                    "a\x00b",
                    "\ud800",
                    "x" * 140_000,
                ]
            ),
            st.text(st.characters(exclude_characters="{}"), max_size=10),
        )
        flag = st.sampled_from(["", "--all", "-a", "-u", "--user=", "-u "])
        return st.tuples(flag, users, st.sampled_from(["", " --all", " -x", " 'x"])).map(
            lambda t: f"{t[0]}{t[1] if t[0].startswith(('-u', '--user')) else ''}{t[2]}"
        )
    if name == "sinfo":
        parts = st.one_of(
            st.sampled_from(["gpu", "debug", "''", "-v", "a b", "n[1-1000]x[1-1000]", "日本", "a\x00b"]),
            st.text(st.characters(exclude_characters="{}"), max_size=10),
        )
        return st.tuples(st.sampled_from(["", "-p ", "--partition=", "-p=", "--bogus "]), parts).map(
            lambda t: t[0] + (t[1] if t[0] else "")
        )
    if name == "srun":
        return st.tuples(hostile_ids, shellish).map(lambda t: f"--jobid='{t[0]}' {t[1]}")
    if name == "salloc":
        return hostile_ids.map(lambda j: f"--attach='{j}'")
    return hostile_ids.map(lambda j: f"--jobid='{j}'")


@pytest.mark.sandbox
@pytest.mark.timeout(600)
def test_fuzz_read_only_magics_and_hostile_ids_against_the_sandbox(
    sandbox_ip: Any, slurm_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.magics import session
    from slurmlab.magics.experiments import ExperimentMagics
    from slurmlab.slurm.poller import get_poller

    runner = slurm_sandbox.runner()
    sandbox_ip.register_magics(ExperimentMagics)
    monkeypatch.chdir(tmp_path)

    def job_ids() -> set[str]:
        return set(runner.run(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout.split())

    # a job whose name and comment try to pass for fields: every listing below must survive it
    hostile = (
        runner.run(
            [
                "sbatch",
                "--parsable",
                "-J",
                HOSTILE_NAME,
                "--comment",
                "UserId=nobody(65534) JobState=x",
                "-t",
                "2",
                "--wrap",
                "sleep 120",
            ]
        )
        .stdout.strip()
        .split(";")[0]
    )
    before, watched = job_ids(), set(get_poller().watched())
    fuzzer = Fuzzer(sandbox_ip, tmp_path / MARKER, lambda: None)
    try:

        def fuzz(name: str, examples: int) -> None:
            @settings(FUZZ_SETTINGS, max_examples=examples)
            @given(_sandbox_lines(name, tmp_path / MARKER))
            def one(line: str) -> None:
                fuzzer.drive("line", name, line)
                assert session.get_session().allocations == []  # a hostile id is never followed

            one()

        for name, examples in SANDBOX_EXAMPLES.items():
            fuzz(name, examples)
        table = sandbox_ip.run_line_magic("squeue", "--all")
        shown = [row for row in table.rows if row.get("job_id") == hostile or hostile in row.values()]
        assert shown or hostile in table.text(), table.text()
    finally:
        runner.run(["scancel", hostile], check=False)
        for name in ("gpu_timeslice", "gpu_isolation"):
            sandbox_ip.magics_manager.magics["line"].pop(name, None)
    print(
        f"\nsandbox fuzz: {fuzzer.count} lines, {fuzzer.refused} refused, slowest {fuzzer.slowest[0]:.2f} s"
    )
    assert fuzzer.count >= sum(SANDBOX_EXAMPLES.values()) * 0.9
    assert job_ids() - before == set(), "the fuzzer left a job behind"
    assert set(get_poller().watched()) <= watched, "a fuzzed id joined the shared poller"
