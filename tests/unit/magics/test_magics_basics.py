"""Registration, help, line splitting and $var expansion of the magics (no Slurm needed)."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

MAGICS = {"line": {"salloc", "srun", "squeue", "sinfo", "scancel", "slurm"}, "cell": {"srun"}}


def test_load_registers_every_magic_and_unload_removes_them(ip: Any) -> None:
    registered = ip.magics_manager.magics
    for kind, names in MAGICS.items():
        assert names <= set(registered[kind]), f"missing {kind} magics: {names - set(registered[kind])}"
    ip.run_line_magic("unload_ext", "slurmlab.magics")
    for kind, names in MAGICS.items():
        assert not names & set(registered[kind])
    ip.run_line_magic("load_ext", "slurmlab.magics")


def test_load_ext_slurmlab_itself_registers_the_magics(ip: Any) -> None:
    import slurmlab

    assert callable(getattr(slurmlab, "load_ipython_extension", None)), (
        "slurmlab/__init__.py must define load_ipython_extension (lazily importing slurmlab.magics) "
        "so that `%load_ext slurmlab` works"
    )
    ip.run_line_magic("unload_ext", "slurmlab.magics")
    assert "salloc" not in ip.magics_manager.magics["line"]
    ip.run_line_magic("load_ext", "slurmlab")
    try:
        assert MAGICS["line"] <= set(ip.magics_manager.magics["line"])
    finally:
        ip.run_line_magic("unload_ext", "slurmlab")
        ip.run_line_magic("load_ext", "slurmlab.magics")


def test_importing_slurmlab_does_not_register_or_import_ipython_magics() -> None:
    import subprocess
    import sys

    code = "import sys, slurmlab; print('slurmlab.magics' in sys.modules, 'ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("name", ["salloc", "srun", "squeue", "sinfo", "scancel", "slurm"])
def test_help_describes_options_and_dollar_expansion(ip: Any, name: str) -> None:
    doc = ip.find_line_magic(name).__doc__
    assert doc and "$var" in doc and "$$" in doc
    assert "usage" in doc.lower() or "%" + name in doc


def test_salloc_help_lists_its_own_options(ip: Any) -> None:
    doc = ip.find_line_magic("salloc").__doc__
    assert "--dry-run" in doc and "--attach" in doc and "%srun" in doc


def test_unclosed_quote_is_a_short_usage_error(ip: Any) -> None:
    with pytest.raises(UsageError, match="close the quote"):
        ip.run_line_magic("srun", "bash -c 'echo hi")


def test_srun_without_allocation_says_what_to_do(ip: Any) -> None:
    with pytest.raises(UsageError, match=r"no live allocation in this notebook.*run %salloc first.*--jobid"):
        ip.run_line_magic("srun", "hostname")


def test_srun_needs_a_command(ip: Any) -> None:
    with pytest.raises(UsageError, match="what should run"):
        ip.run_line_magic("srun", "-n 2")


def test_cell_srun_rejects_an_empty_cell_and_a_line_command(ip: Any) -> None:
    with pytest.raises(UsageError, match="cell is empty"):
        ip.run_cell_magic("srun", "", "   \n")
    with pytest.raises(UsageError, match="no command on its line"):
        ip.run_cell_magic("srun", "hostname", "echo hi\n")


def test_scancel_rejects_something_that_is_not_a_job_id(ip: Any) -> None:
    with pytest.raises(UsageError, match="not a job id: abc"):
        ip.run_line_magic("scancel", "abc")


def test_scancel_without_allocation_asks_for_an_id(ip: Any) -> None:
    with pytest.raises(UsageError, match="no live allocation to cancel.*give a job id"):
        ip.run_line_magic("scancel", "")


def test_squeue_rejects_stray_arguments(ip: Any) -> None:
    with pytest.raises(UsageError, match="does not take"):
        ip.run_line_magic("squeue", "--bogus")


def test_a_usage_error_in_a_cell_shows_one_line_not_a_traceback(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ip.run_cell("%scancel abc")
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert isinstance(result.error_in_exec, UsageError)
    assert "UsageError: " in text and "not a job id: abc" in text
    assert "Traceback" not in text


def test_split_line_keeps_slurm_flags_in_order_and_the_command_verbatim(ip: Any) -> None:
    from slurmlab.magics.args import split_line
    from slurmlab.magics.steps import StepMagics

    magics = ip.magics_manager.registry["StepMagics"]
    assert isinstance(magics, StepMagics)
    ns, rest, command = split_line(
        magics, "srun", "--jobid 7 -N2 --gpus-per-task=1 --label -- tool --jobid=9 --label 'a b'"
    )
    assert ns.jobid == "7" and ns.label
    assert rest == ["-N2", "--gpus-per-task=1"]
    assert command == ["tool", "--jobid=9", "--label", "a b"]


def test_own_options_are_never_abbreviations_of_slurm_flags(ip: Any) -> None:
    from slurmlab.magics.args import split_line

    magics = ip.magics_manager.registry["StepMagics"]
    # --time is srun's; it must not be read as our --timeout
    ns, rest, _ = split_line(magics, "srun", "--time=5 hostname")
    assert ns.timeout is None and rest == ["--time=5", "hostname"]
