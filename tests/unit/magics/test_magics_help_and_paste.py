"""`%salloc --help` answers at once from slurmlab (passed to Slurm it waited 10 s for a job id that never
came); options pasted from slides with typographic dashes or quotes are named with their fix."""

from __future__ import annotations

import time
from typing import Any

import pytest
from IPython.core.error import UsageError


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("salloc", "--help"),
        ("salloc", "-h"),
        ("salloc", "--gpus=2 --help"),
        ("srun", "--help"),
        ("srun", "-h"),
        ("squeue", "--help"),
        ("sinfo", "--help"),
        ("scancel", "--help"),
        ("slurm", "--help"),
    ],
)
def test_help_is_printed_at_once_and_nothing_runs(
    ip: Any, capsys: pytest.CaptureFixture[str], name: str, line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import runner as runner_mod

    def no_slurm(*_a: Any, **_kw: Any) -> Any:
        raise AssertionError("help must not run a Slurm command")

    monkeypatch.setattr(runner_mod.Runner, "run", no_slurm)
    monkeypatch.setattr(runner_mod.Runner, "popen", no_slurm)
    t0 = time.monotonic()
    assert ip.run_line_magic(name, line) is None
    assert time.monotonic() - t0 < 2
    out = capsys.readouterr().out
    assert f"%{name}" in out  # the magic's usage and its options
    assert (f"man {name}" in out) == (
        name in {"salloc", "srun", "squeue", "sinfo"}
    )  # where Slurm's options are


def test_squeue_h_stays_slurms_noheader(ip: Any) -> None:
    # `squeue -h` is --noheader: it is passed on, not taken as help
    from slurmlab.magics import args

    assert not args._wants_help("squeue", ["-h"])
    assert not args._wants_help("sinfo", ["-h", "-N"])
    assert args._wants_help("salloc", ["-N2", "-h"])


def test_help_after_srun_command_belongs_to_the_command() -> None:
    from slurmlab.magics import args

    assert not args._wants_help("srun", ["-n2", "python", "-h"])
    assert not args._wants_help("srun", ["python", "--help"])


@pytest.mark.parametrize(
    ("typed", "fixed"),
    [
        ("\u2013t 10", "'-t'"),  # en dash from slides
        ("\u2014gpus=2", "'--gpus=2'"),  # autocorrect made "--" one em dash
        ("\u2013\u2013gpus=2", "'--gpus=2'"),
        ("\u2212N2", "'-N2'"),  # minus sign
        ("--job-name=\u201crun1\u201d", "'--job-name=\"run1\"'"),
        ("\u2212=", "'--='"),  # a dash and no name (the fuzzer found an IndexError here)
    ],
)
def test_pasted_typography_is_named_with_the_fix(ip: Any, typed: str, fixed: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("salloc", f"--dry-run {typed}")
    message = str(info.value)
    assert fixed in message and ("U+" in message or "typographic quotes" in message), message


def test_a_command_may_hold_any_text(ip: Any) -> None:
    from slurmlab.magics import args

    args._check_pasted_typography(["echo", "\u201chi\u201d", "a\u2013b"])  # not options: left alone
