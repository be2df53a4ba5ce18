"""slurmlab used from inside a Slurm job (a kernel of JupyterHub's batchspawner or Open OnDemand), on the sandbox.

A Python process runs as the command of a real ``salloc`` (so it has the job's whole environment: SLURM_JOB_ID,
SLURM_GPUS, SLURM_NNODES, ...) and uses slurmlab there. Issue 29, point 3: allocations it makes behave as from a
login node, whatever GPU count the surrounding job has.
"""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import slurmlab

pytestmark = pytest.mark.sandbox

# the checkout (or installed tree) this test runs, for the Python inside the job
ROOT = str(Path(slurmlab.__file__).resolve().parents[1])

SECOND_ALLOCATIONS = textwrap.dedent(
    """
    import json, os
    from slurmlab.slurm.allocation import Allocation

    found = {"outer": os.environ["SLURM_JOB_ID"], "outer_gpus": os.environ.get("SLURM_GPUS"), "inner": []}
    for count in (1, 3):  # fewer and more GPUs than the surrounding job's 2
        lines = []
        with Allocation.submit([f"--gpus={count}", "-t", "5"], validate=False) as alloc:
            alloc.wait(timeout=60)
            step = alloc.srun(
                ["/bin/sh", "-c", 'echo "$SLURM_JOB_ID|$CUDA_VISIBLE_DEVICES"'],
                on_output=lambda stream, line: lines.append([stream, line]),
                timeout=60,
            )
            found["inner"].append({
                "count": count, "job": alloc.job_id, "gpus": alloc.refresh().gpus,
                "rc": step.returncode, "lines": lines,
            })
    print("RESULT " + json.dumps(found))
    """
)


def inside_job(runner: Any, salloc_options: list[str], code: str, timeout: float = 150) -> dict[str, Any]:
    """Run ``code`` in a Python started by ``salloc <options>`` (the job's environment, as a kernel has it);
    what it printed after ``RESULT ``."""
    result = runner.run(
        ["salloc", *salloc_options, sys.executable, "-c", code],
        env={"PYTHONPATH": ROOT},
        timeout=timeout,
        check=False,
    )
    said = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and said, (
        f"the Python inside the job failed:\n{result.stdout}\n{result.stderr}"
    )
    found: dict[str, Any] = json.loads(said[-1].split(" ", 1)[1])
    return found


def test_a_second_allocation_from_inside_a_job_gets_the_gpus_slurm_gave_it(sandbox: Any) -> None:
    found = inside_job(sandbox.runner(), ["-N1", "--gpus=2", "-t", "5"], SECOND_ALLOCATIONS)
    assert found["outer_gpus"] == "2"  # the Python really ran inside the job, with its GPU count
    for inner in found["inner"]:
        assert inner["job"] != found["outer"]
        assert inner["rc"] == 0, f"the step in the {inner['count']}-GPU allocation failed: {inner['lines']}"
        ((node, indices),) = inner["gpus"].items()
        assert len(indices) == inner["count"], inner
        # the step ran in the new job and saw exactly the GPUs Slurm gave that job (the sandbox's
        # CUDA_VISIBLE_DEVICES keeps the node's numbering)
        (out,) = [line for stream, line in inner["lines"] if stream == "stdout"]
        job, visible = out.split("|")
        assert job == inner["job"]
        assert sorted(int(i) for i in visible.split(",")) == sorted(indices), (node, out)


# Issue 29, point 2: a kernel (an IPython shell with slurmlab loaded) inside a job knows that job. It makes a
# second allocation of its own too: that one ends with the kernel, the session's job does not.
KERNEL_IN_JOB = textwrap.dedent(
    """
    import contextlib, io, json, os
    from IPython.core.interactiveshell import InteractiveShell
    from slurmlab.magics.session import Session
    from slurmlab.slurm.allocation import Allocation

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "slurmlab")

    def cell(magic, line):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                value = shell.run_line_magic(magic, line)
            except Exception as exc:  # a UsageError is what the notebook would show
                value = f"{type(exc).__name__}: {exc}"
        return out.getvalue() + ("" if value is None else str(value))

    found = {"own": os.environ["SLURM_JOB_ID"]}
    found["status"] = cell("slurm", "")
    found["srun"] = cell("srun", "bash -c 'echo \\"STEP $SLURM_JOB_ID|$CUDA_VISIBLE_DEVICES\\"'")
    own = getattr(Session.of(shell), "own", None)  # (a slurmlab without it fails below, not here)
    found["gpus"] = own.gpus if own is not None else None
    if own is not None:  # the topology and binding probes run their steps in it too
        topology = own.topology(own.nodes[0], source="nvidia-smi")
        found["topology"] = [topology.source, list(topology.gpus)]
        found["binding"] = [[row.node, list(row.gpus)] for row in own.explain_binding().rows]
        # its panel, as any allocation's; the doctor's GPU probe step, beside the kernel's own step
        from slurmlab.slurm.doctor_gpu import gpu_checks
        from slurmlab.widgets.panel import header_html, panel_html

        found["panel"] = header_html(own) + panel_html(own)
        found["doctor"] = [f.evidence for f in gpu_checks(own.runner, found["own"], timeout=30)]
    found["scancel"] = cell("scancel", found["own"])
    second = Allocation.submit(["--gpus=1", "-t", "5"], validate=False)
    second.wait(timeout=60)
    found["second"] = second.job_id
    print("RESULT " + json.dumps(found))
    """
)

# the kernel ends (its exit hooks and guardian run); then the job's own shell looks at both jobs. $LAUNCH is "" (a
# kernel started by salloc) or "srun" (batchspawner starts the server as a step of its batch job). printf, not
# echo: sbatch --wrap runs /bin/sh, whose echo may turn the JSON's \n into line ends
AFTER_THE_KERNEL = (
    'out=$($LAUNCH "$PY" -c "$KERNEL_CODE"); printf "%s\\n" "$out"; '
    'second=$(printf "%s\\n" "$out" | sed -n \'s/.*"second": "\\([0-9]*\\)".*/\\1/p\'); sleep 3; '
    'echo "AFTER $(squeue -h -t all -j "$SLURM_JOB_ID" -o %T)|$(squeue -h -t all -j "$second" -o %T)"'
)
JOB_REQUEST = ["-N1", "--gpus=2", "-t", "5"]


def _kernel_in_salloc(runner: Any, tmp_path: Path) -> str:
    result = runner.run(
        ["salloc", *JOB_REQUEST, "bash", "-c", AFTER_THE_KERNEL],
        env={"PYTHONPATH": ROOT, "PY": sys.executable, "KERNEL_CODE": KERNEL_IN_JOB, "LAUNCH": ""},
        timeout=150,
        check=False,
    )
    return f"{result.stdout}\n{result.stderr}"


def _kernel_in_batch_step(runner: Any, tmp_path: Path) -> str:
    log = tmp_path / "server.log"
    runner.run(
        ["sbatch", *JOB_REQUEST, "-o", str(log), "--wrap", AFTER_THE_KERNEL],
        env={"PYTHONPATH": ROOT, "PY": sys.executable, "KERNEL_CODE": KERNEL_IN_JOB, "LAUNCH": "srun"},
    )
    deadline = time.monotonic() + 150  # a hang guard: the job takes seconds
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if "AFTER " in text:
            return text
        time.sleep(0.5)
    return log.read_text() if log.exists() else "(the batch job wrote nothing)"


@pytest.mark.parametrize("launch", [_kernel_in_salloc, _kernel_in_batch_step], ids=["salloc", "batchspawner"])
def test_a_kernel_inside_a_job_uses_it_and_never_cancels_it(
    sandbox: Any, tmp_path: Path, launch: Any
) -> None:
    printed = launch(sandbox.runner(), tmp_path)
    said = [line for line in printed.splitlines() if line.startswith("RESULT ")]
    after = [line for line in printed.splitlines() if line.startswith("AFTER ")]
    assert said and after, f"the kernel inside the job failed:\n{printed}"
    found = json.loads(said[-1].split(" ", 1)[1])
    own = found["own"]
    # %slurm names the session's job before anything of the notebook, with its GPUs and time, and says the kernel
    # never cancels it
    status = found["status"]
    assert f"this session: job {own} on node" in status and "2 × h100" in status, status
    assert "never cancels it" in status
    assert status.index("this session:") < status.index("no allocation of this notebook yet"), status
    # %srun with no allocation of the notebook runs in the session's job, with the GPUs Slurm gave it (in the
    # batchspawner shape, beside the step the kernel itself runs in, which holds all of the job's memory)
    ((node, indices),) = found["gpus"].items()
    assert len(indices) == 2, found
    (step,) = [line for line in found["srun"].splitlines() if line.startswith("STEP ")]
    job, visible = step.removeprefix("STEP ").split("|")
    assert job == own and sorted(int(i) for i in visible.split(",")) == sorted(indices), found["srun"]
    # the topology probe (a step running nvidia-smi on the node) sees the job's two GPUs; the binding probe's
    # tasks got exactly the ones Slurm gave the job
    assert found["topology"][0] == "nvidia-smi" and len(found["topology"][1]) == 2, found["topology"]
    assert found["binding"] == [[node, indices]], found["binding"]
    assert f"job {own} is the job this session runs in" in found["scancel"], found["scancel"]
    # its panel says it is this session's and never cancelled, and warns of the walltime (5 min: the last
    # five minutes from the start); the doctor's probe step ran in it (no "Memory required by task")
    panel = found["panel"]
    assert f"this session: job {own}" in panel and "never cancels it" in panel, panel
    assert "Time almost up" in panel and "this kernel runs in this job" in panel, panel
    assert "Time almost up" in status, status
    assert found["doctor"] and all("the sandbox has no GPU" in e for e in found["doctor"]), found["doctor"]
    # the kernel ended: the allocation it made ended with it, the job it ran in did not
    own_state, second_state = after[-1].removeprefix("AFTER ").split("|")
    assert own_state == "RUNNING", printed
    assert second_state not in ("RUNNING", "PENDING"), printed
