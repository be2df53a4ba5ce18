"""Record jobs whose nodes got different CPU counts, for the unit test of the CPUs a provisioned kernel asks for.

    python scripts/record_kernel_cpus.py 22.05
    bash scripts/in-slurm-root.sh 24.11 python scripts/record_kernel_cpus.py 24.11

Starts a two-node ``dgx-h100`` sandbox (as scripts/record-golden.py does) and records into
``tests/data/slurm/<version>/kernel_cpus/`` two scenes, one job each: ``salloc --no-shell -N2 -n3
--gpus-per-node=1`` (k00-k06: three tasks over two nodes: Slurm gives the first node two CPUs and the second one)
and the same without GPUs (k10-k16, the files ending ``_cpu_only``: no GRES, so no ``GRES=`` in the node blocks).
For each: the job's detail as slurmlab reads it (``scontrol show job -d``, and ``scontrol --json show job -d``
where this Slurm has it, else ``squeue --json``: 22.05's scontrol refuses ``--json``), then the kernel's step as
the provisioner starts it (:func:`slurmlab.slurm.kernel_steps.kernel_step_argv`) with the first node's two CPUs
(it runs there, and says so) and with one more (Slurm refuses it: the first node holds two). Last, the nodes
(``scontrol show node -d``, k20): the shape the JSON's cores need to become CPU_IDs. Paths are rewritten to
/srv/sandbox and /home/user and the host name to ``vm``; ``commands.txt`` lists each file with its argv and exit
code (FakeRunner's ``recorded``).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from pathlib import Path

from _recording import DATA, emptied, rewrite, sandbox, scratch, version_parser, write_commands

from slurmlab.slurm.controller import SCONTROL_JSON_SINCE
from slurmlab.slurm.kernel_steps import kernel_step_argv
from slurmlab.slurm.runner import Runner

TIMEOUT = 60.0
# what the kernel's step prints instead of starting a kernel: the node it runs on. (Not its CPU mask: a sandbox's
# nodes share this machine's few CPUs, so the binding there says nothing of the node's.)
STEP_REPORT = 'echo "node=$SLURMD_NODENAME"'


class Recorder:
    """Each command's stdout into ``<name>``, its stderr into ``<stem>.stderr``, and its line in commands.txt."""

    def __init__(self, out: Path, runner: Runner, rewrites: list[tuple[str, str]]) -> None:
        self.out, self.runner, self.rewrites = out, runner, rewrites
        self.lines: list[str] = []

    def run(self, name: str, argv: list[str]) -> tuple[int, str, str]:
        res = self.runner.run(argv, check=False, timeout=TIMEOUT)
        stem = name.rpartition(".")[0]
        if res.stdout.strip():
            (self.out / name).write_text(rewrite(res.stdout, self.rewrites))
        if res.stderr.strip():
            (self.out / f"{stem}.stderr").write_text(rewrite(res.stderr, self.rewrites))
        self.lines.append(f"{name}\trc={res.returncode}\t{rewrite(shlex.join(argv), self.rewrites)}")
        return res.returncode, res.stdout, res.stderr


def scene(rec: Recorder, version: tuple[int, ...], first: int, suffix: str, request: list[str]) -> None:
    """One job of ``request`` (salloc's options past its name and time), numbered from ``first``: its salloc, its
    detail in text and JSON, the kernel's step with 2 CPUs and with 3, and its scancel."""

    def name(n: int, what: str, ext: str = "txt") -> str:
        return f"k{first + n:02d}_{what}{suffix}.{ext}"

    rc, out, err = rec.run(
        name(1, "salloc_n3_over_2_nodes"), ["salloc", "--no-shell", "-J", "kernel-cpus", "-t", "5", *request]
    )
    granted = re.search(r"Granted job allocation ([0-9]+)", out + err)
    if rc != 0 or granted is None:
        raise SystemExit(f"salloc gave no allocation (exit {rc}): {err.strip()}")
    job = granted.group(1)
    try:
        rec.run(name(2, "scontrol_show_job_d"), ["scontrol", "show", "job", "-d", job])
        if version[:2] >= SCONTROL_JSON_SINCE:
            rec.run(
                name(3, "scontrol_json_show_job_d", "json"), ["scontrol", "--json", "show", "job", "-d", job]
            )
        else:  # 22.05's scontrol has no --json: its squeue's JSON is the same layout (openapi v0.0.38)
            rec.run(name(3, "squeue_json", "json"), ["squeue", "--json", f"--jobs={job}"])
        for cpus in (2, 3):
            step = kernel_step_argv(job, cpus, ["sh", "-c", STEP_REPORT], chdir="/")
            rec.run(name(cpus + 2, f"kernel_step_{cpus}_cpus"), step)
    finally:
        rec.run(name(6, "scancel"), ["scancel", job])


def record(rec: Recorder, version: tuple[int, ...]) -> None:
    rec.run("k00_sinfo_version.txt", ["sinfo", "--version"])
    scene(rec, version, 0, "", ["-N", "2", "-n", "3", "--gpus-per-node=1"])
    # the same spread with no GRES: the node blocks of its detail hold CPU_IDs and Mem only
    scene(rec, version, 10, "_cpu_only", ["-N", "2", "-n", "3"])
    # the nodes' shape (sockets, cores per socket), which the JSON's cores need to become CPU_IDs up to v0.0.40
    rec.run("k20_scontrol_show_node_d.txt", ["scontrol", "show", "node", "-d"])


def main() -> int:
    version_text = version_parser(__doc__, "kernel_cpus").parse_args().version
    out = emptied(DATA / version_text / "kernel_cpus")
    host, home = socket.gethostname(), os.path.expanduser("~")
    with scratch("slsb-kernel-cpus-") as base, sandbox("dgx-h100", base / "sb", nodes=2) as sb:
        rewrites = [(str(base / "sb"), "/srv/sandbox"), (str(base), "/home/user"), (home, "/home/user")]
        rec = Recorder(out, sb.runner(TIMEOUT), [*rewrites, (host, "vm")])
        os.chdir("/")  # salloc records its working folder; / needs no rewrite
        record(rec, sb.version)
        write_commands(
            out,
            rec.lines,
            f"# recorded by scripts/record_kernel_cpus.py from a Slurm {version_text} sandbox (dgx-h100 x2)\n",
        )
    print(f"record_kernel_cpus: wrote {len(list(out.iterdir()))} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
