"""What ``%load_ext slurmlab`` imports (issue 14, point 2): only what registering the magics needs.

The Slurm layer (the allocation machinery, the runner, the poller, asyncio), the request language, the parsed
models, the widgets and every heavy package load on first use, so loading the extension stays cheap in a
kernel (its time is measured by benchmarks/bench_notebook.py, never here). Each check runs in a fresh
interpreter, as Bokeh's import tests do: this test process has long imported all of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# modules %load_ext must not import: (module, why it matters)
NOT_AT_LOAD = (
    ("asyncio", "the event loop machinery: the allocation's async API loads it"),
    ("slurmlab.slurm.allocation", "the allocation lifecycle, with its guardian and salloc process handling"),
    ("slurmlab.slurm.runner", "the Runner: nothing runs Slurm at load"),
    ("slurmlab.slurm.poller", "the shared poller: no thread at load"),
    ("slurmlab.slurm.queries", "the queries and every parser behind them"),
    ("slurmlab.slurm.inventory", "the cluster inventory cache"),
    ("slurmlab.core.request.request", "the request language, loaded by the first %salloc"),
    ("slurmlab.core.slurm.models", "the parsed Slurm records"),
    ("slurmlab.core.slurm.parse_json", "the JSON parsers"),
    ("slurmlab.core.gpu.mig", "the MIG profile tables"),
    ("slurmlab.widgets.panel", "the live panel, loaded when the first Allocation displays"),
    ("slurmlab.sandbox", "the sandbox"),
    # each magic module is declared with IPython's register_lazy and imported when one of its magics is used
    ("slurmlab.magics.allocate", "%salloc and %scancel, imported by their first use"),
    ("slurmlab.magics.steps", "%srun, imported by its first use"),
    ("slurmlab.magics.status", "%squeue, %sinfo and %slurm, imported by their first use"),
    ("slurmlab.magics.experiments", "%gpu_timeslice and %gpu_isolation, imported by their first use"),
    ("slurmlab.magics.accounting", "%sacct and %sshare, imported by their first use"),
    ("slurmlab.magics.kernel", "the operations on the kernel's session, imported with the first magic"),
    ("ipywidgets", "heavy: only the widgets import it"),
    ("bokeh", "heavy: only the figures import it"),
    ("cupy", "heavy: only the experiments import it"),
    ("numpy", "heavy: only the experiments and figures import it"),
)

_PROBE = textwrap.dedent("""
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    before = set(sys.modules)
    ip.run_line_magic("load_ext", "slurmlab")
    loaded = sorted(set(sys.modules) - before)
    magics = sorted(ip.magics_manager.magics["line"])
    first_use = None
    if "--reload" in sys.argv:  # unloaded before any use, then loaded again: the magics still resolve
        ip.run_line_magic("unload_ext", "slurmlab")
        gone = ip.find_line_magic("salloc") is None
        ip.run_line_magic("load_ext", "slurmlab")
        assert gone, "%salloc still there after %unload_ext slurmlab"
    if "--two-names" in sys.argv:  # loaded as slurmlab, unloaded as slurmlab.magics: one extension, two names
        ip.run_line_magic("load_ext", "slurmlab.magics")
        ip.run_line_magic("unload_ext", "slurmlab.magics")
        ip.run_line_magic("load_ext", "slurmlab")
        first_use = [ip.find_line_magic("salloc") is not None]
    if "--use" in sys.argv:  # the deferred imports resolve on first use: a dry run with no cluster
        dry = ip.run_line_magic("salloc", "--dry-run --gpus=1 -t 10")
        first_use = [dry.command, "slurmlab.core.request.request" in sys.modules,
                     sorted(m for m in sys.modules if m.startswith("slurmlab.magics."))]
        if "--reload" in sys.argv:  # used, unloaded and loaded again: the imported module registers at once
            ip.run_line_magic("unload_ext", "slurmlab")
            ip.run_line_magic("load_ext", "slurmlab")
            first_use.append(ip.run_line_magic("salloc", "--dry-run --gpus=2 -t 10").command)
    print(json.dumps({"loaded": loaded, "magics": magics, "first_use": first_use}))
""")


def _probe(*args: str) -> dict[str, object]:
    env = {**os.environ, "SLURM_CONF": "/nonexistent/slurmlab-load-ext-test/slurm.conf"}
    env.pop("PYTHONSTARTUP", None)
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def at_load() -> dict[str, object]:
    return _probe()


@pytest.mark.parametrize(("module", "why"), NOT_AT_LOAD, ids=[m for m, _ in NOT_AT_LOAD])
def test_load_ext_does_not_import(at_load: dict[str, object], module: str, why: str) -> None:
    loaded = at_load["loaded"]
    assert isinstance(loaded, list)
    pulled = [m for m in loaded if m == module or m.startswith(module + ".")]
    assert not pulled, f"%load_ext slurmlab imported {pulled} ({why})"


def test_load_ext_registers_every_magic(at_load: dict[str, object]) -> None:
    from slurmlab.magics import _MAGIC_NAMES

    magics = at_load["magics"]
    assert isinstance(magics, list)
    assert set(_MAGIC_NAMES["line"]) <= set(magics)


def test_what_load_ext_defers_loads_on_first_use() -> None:
    result = _probe("--use")
    first_use = result["first_use"]
    assert isinstance(first_use, list)
    command, request_loaded, magic_modules = first_use
    assert isinstance(command, str) and command.startswith("salloc --no-shell") and "--gpus=1" in command
    assert request_loaded is True
    # the first %salloc imports its own magic module, and no other magic module with it
    assert "slurmlab.magics.allocate" in magic_modules
    assert not {
        "slurmlab.magics.steps",
        "slurmlab.magics.status",
        "slurmlab.magics.experiments",
        "slurmlab.magics.accounting",
    } & set(magic_modules), magic_modules


def test_the_magics_resolve_after_unload_and_load_again() -> None:
    first_use = _probe("--reload", "--use")["first_use"]
    assert isinstance(first_use, list)
    assert first_use[0].startswith("salloc --no-shell") and "--gpus=2" in first_use[-1]


def test_unloaded_under_one_name_the_extension_loads_again_under_the_other() -> None:
    """`%load_ext slurmlab` and `%load_ext slurmlab.magics` are one extension: a shell that loaded it as
    slurmlab, then loaded and unloaded it as slurmlab.magics, gets the magics back from `%load_ext slurmlab`
    (IPython had kept slurmlab as loaded, so that load did nothing and %salloc was gone)."""
    assert _probe("--two-names")["first_use"] == [True]
