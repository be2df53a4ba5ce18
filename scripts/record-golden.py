#!/usr/bin/env python3
"""Record the golden Slurm outputs of the Slurm installed here into a folder of the repo.

Run inside a version's root, e.g.::

    bash scripts/in-slurm-root.sh 24.11 python scripts/record-golden.py tests/data/slurm/24.11

It starts a sandbox of the ``dgx-h100`` profile (2 nodes), runs the workload the shared fixtures used
(GPUs, closest binding + enforce-binding over 2 nodes, shards, held, pending, completed, cancelled,
failed, an array, two steps), captures the state commands (with ``sinfo --json``, ``squeue --yaml``, the
column/one-line/config forms, and jobs, nodes, steps and sinfo in every older data_parser layout this Slurm
still writes), then the error forms, then the life of one
allocation as slurmlab submits it (``l*`` files: salloc pending while the cluster is full, its squeue/scontrol
at each state, granted, a step, cancelled; a second pending salloc interrupted; unknown job ids; a stopped
controller), and writes each
command's output as ``<name>.<ext>`` (stderr as ``<name>.stderr``) with ``commands.txt`` (argv, exit
code). A second, one-node sandbox of ``h200-mig`` given 2 threads per core records MIG jobs and the
CPU_IDs of a hyper-threaded node (``x_*`` files). Paths are rewritten to /srv/sandbox, /srv/sandbox2
and /home/user and the host name to ``vm``; JSON is stored compactly (one line) to keep the files
small, its content unchanged. Both sandboxes are stopped at the end, failure included. Files recorded by
hand (``hostile_*``, and their section of ``commands.txt``) are kept when a folder is recorded again.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from _recording import parser, rewrite, scratch, write_commands

from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT
from slurmlab.errors import SlurmlabError
from slurmlab.sandbox import control
from slurmlab.sandbox.profile import CpuLayout, Profile, load_profile
from slurmlab.slurm.runner import Runner

TIMEOUT = 30.0
LAYOUTS = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")


def _threaded(name: str) -> Profile:
    """h200-mig with 2 threads per core: Slurm's CPU_IDs then count threads, which JSON must match."""
    prof = load_profile(name)
    if name == "h200-mig":
        prof = replace(prof, cpu=CpuLayout(prof.cpu.sockets, prof.cpu.cores_per_socket, 2))
    return prof


class Recorder:
    def __init__(self, out: Path, runner: Runner, rewrites: list[tuple[str, str]]) -> None:
        self.out = out
        self.runner = runner
        self.rewrites = rewrites
        self.lines: list[str] = []

    def save(self, name: str, argv: list[str], rc: int, out: str, err: str, note: str = "") -> None:
        """Write one command's output as :meth:`run` does (for commands run some other way)."""
        stem, _, ext = name.rpartition(".")
        if out.strip():
            text = out
            if ext == "json":
                try:
                    text = json.dumps(json.loads(out), separators=(",", ":"), sort_keys=False) + "\n"
                except json.JSONDecodeError:
                    pass
            (self.out / name).write_text(self._clean(text))
        if err.strip():
            (self.out / f"{stem}.stderr").write_text(self._clean(err))
        self.lines.append(
            f"{name}\trc={rc}\t{self._clean(shlex.join(argv))}" + (f"\t# {note}" if note else "")
        )

    def _clean(self, text: str) -> str:
        return rewrite(text, self.rewrites)

    def run(self, name: str, argv: list[str], *, timeout: float = TIMEOUT) -> tuple[int, str, str]:
        try:
            res = self.runner.run(argv, check=False, timeout=timeout)
            rc, out, err = res.returncode, res.stdout, res.stderr
        except SlurmlabError as exc:  # a timeout: what a pending salloc does on some versions
            rc, out, err = 124, "", str(exc)
        self.save(name, argv, rc, out, err)
        return rc, out, err

    def note(self, text: str) -> None:
        self.lines.append(text)

    def write_commands(self, header: str) -> None:
        write_commands(self.out, self.lines, header)


def _job_id(stdout: str, stderr: str) -> str | None:
    m = re.search(
        r"(?:Submitted batch job|Granted job allocation|Pending job allocation) ([0-9]+)", stdout + stderr
    )
    return m.group(1) if m else None


def _wait_state(runner: Runner, job: str, states: set[str], seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        res = runner.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], check=False)
        if res.stdout.strip() in states:
            return
        time.sleep(0.5)


def _workload(rec: Recorder, runner: Runner, jobout: Path) -> tuple[list[subprocess.Popen[str]], str | None]:
    r = rec.run
    out = str(jobout)
    rec.note("## --- workload ---")
    r("w01_salloc_gpus2.txt", ["salloc", "--no-shell", "-J", "gpus2", "-t", "60", "--gpus=2"])
    _, o, e = r(
        "w02_salloc_gpn_closest_enforce.txt",
        [
            "salloc",
            "--no-shell",
            "-J",
            "gpn2",
            "-t",
            "60",
            "-N",
            "2",
            "--ntasks-per-node=2",
            "--gpus-per-node=h100:1",
            "--gpu-bind=closest",
            "--gres-flags=enforce-binding",
        ],
    )
    two_node = _job_id(o, e)
    r("w03_salloc_shard4.txt", ["salloc", "--no-shell", "-J", "shard4", "-t", "60", "--gres=shard:4"])
    _, o, e = r(
        "w06_sbatch_running.txt",
        [
            "sbatch",
            "-J",
            "batchrun",
            "-t",
            "60",
            "-o",
            f"{out}/%j.out",
            "-n",
            "1",
            "--gpus-per-task=1",
            "--wrap",
            "sleep 600",
        ],
    )
    batch = _job_id(o, e)
    r(
        "w07_sbatch_held.txt",
        [
            "sbatch",
            "-H",
            "-J",
            "heldjob",
            "-t",
            "30",
            "-o",
            f"{out}/%j.out",
            "--gpus=1",
            "--wrap",
            "sleep 10",
        ],
    )
    _, o, e = r(
        "w08_sbatch_complete.txt",
        ["sbatch", "-J", "donejob", "-t", "5", "-o", f"{out}/%j.out", "--wrap", "true"],
    )
    done = _job_id(o, e)
    _, o, e = r(
        "w09_sbatch_tocancel.txt",
        ["sbatch", "-J", "cancelme", "-t", "5", "-o", f"{out}/%j.out", "--gpus=1", "--wrap", "sleep 600"],
    )
    cancel = _job_id(o, e)
    r(
        "w10_sbatch_array.txt",
        [
            "sbatch",
            "-J",
            "arr",
            "-t",
            "60",
            "-o",
            f"{out}/%A_%a.out",
            "--array=0-5%3",
            "--gpus=1",
            "--wrap",
            "sleep 600",
        ],
    )
    r(
        "w11_sbatch_pending_resources.txt",
        [
            "sbatch",
            "-J",
            "bigwait",
            "-t",
            "60",
            "-o",
            f"{out}/%j.out",
            "-N",
            "2",
            "--gpus-per-node=8",
            "--wrap",
            "sleep 10",
        ],
    )
    _, o, e = r(
        "w12_sbatch_fail.txt",
        ["sbatch", "-J", "failjob", "-t", "5", "-o", f"{out}/%j.out", "--wrap", "exit 3"],
    )
    failed = _job_id(o, e)
    if cancel:
        _wait_state(runner, cancel, {"RUNNING"})
        r("w13_scancel.txt", ["scancel", cancel])
    for job in (done, failed, cancel):
        if job:
            _wait_state(runner, job, {"COMPLETED", "FAILED", "CANCELLED"})
    steps: list[subprocess.Popen[str]] = []
    for job, argv in (
        (batch, ["-J", "stepsleep", "sleep", "300"]),
        (two_node, ["-J", "gpustep", "-N", "2", "-n", "2", "--gpus-per-node=1", "sleep", "300"]),
    ):
        if job:
            full = ["srun", f"--jobid={job}", "--overlap", *argv]
            rec.note(f"bg\t-\t{rec._clean(shlex.join(full))} &")
            steps.append(runner.popen(full))
    time.sleep(3)
    return steps, batch


def _captures(rec: Recorder) -> None:
    r = rec.run
    rec.note("## --- state captures ---")
    r("00_slurmd_version.txt", ["slurmd", "-V"])
    r("00_sinfo_version.txt", ["sinfo", "--version"])
    r("s05_scontrol_json_show_job_d.json", ["scontrol", "--json", "show", "job", "-d"])
    r("s06_scontrol_show_job_d.txt", ["scontrol", "show", "job", "-d"])
    r("s01_squeue.json", ["squeue", "--json"])
    r("s07_scontrol_json_show_node.json", ["scontrol", "--json", "show", "node"])
    r("s08_scontrol_show_node_d.txt", ["scontrol", "show", "node", "-d"])
    _, default_parts, _ = r(
        "s09_scontrol_json_show_partition.json", ["scontrol", "--json", "show", "partition"]
    )
    r("s04_sinfo_nodes.json", ["sinfo", "--json"])
    r("s03_squeue.yaml", ["squeue", "--yaml"])
    for layout in LAYOUTS:
        rc, _, _ = r(
            f"s09_scontrol_json_{layout}_show_partition.json",
            ["scontrol", f"--json={layout}", "show", "partition"],
        )
        if rc == 0 and layout not in _data_parser(default_parts):
            _layout_captures(rec, layout)
    r("s16_scontrol_show_partition.txt", ["scontrol", "show", "partition"])
    r("s20_sinfo_partitions.txt", ["sinfo", "-h", "-o", "%P"])
    r("s13_scontrol_json_show_steps.json", ["scontrol", "--json", "show", "steps"])
    r("s13b_scontrol_show_steps.txt", ["scontrol", "show", "steps"])
    r("s21_squeue_brief.txt", ["squeue", "-h", "-t", "all", "-o", BRIEF_FORMAT])
    r("s22_squeue_owners.txt", ["squeue", "-h", "-t", "all", "-o", "%A|%U"])
    r("s23_scontrol_ping.txt", ["scontrol", "ping"])
    _other_forms(rec)


def _other_forms(rec: Recorder) -> None:
    """The column, one-line and config forms people paste into ``slurmlab parse`` (named as in the shared
    fixtures): each must parse as a table of every row, or as what it is."""
    r = rec.run
    r("s06b_scontrol_oneliner_show_job_d.txt", ["scontrol", "-o", "show", "job", "-d"])
    r("s10_sinfo_N_O.txt", ["sinfo", "-N", "-O", "NodeList,Gres:50,GresUsed:80,StateLong"])
    r("s11_squeue_o.txt", ["squeue", "-o", "%i %T %b %R"])
    r("s11b_squeue_all_states_o.txt", ["squeue", "-t", "all", "-o", "%i %T %b %R"])
    r("s12b_scontrol_show_config.txt", ["scontrol", "show", "config"])
    r("s14_squeue_steps.txt", ["squeue", "-s"])
    r(
        "s15_squeue_O_tres.txt",
        [
            "squeue",
            "-O",
            "JobID:12,ArrayJobID:10,ArrayTaskID:10,StateCompact:6,"
            "tres-per-node:30,tres-per-job:20,tres-per-task:20,tres-alloc:60,ReasonList:30",
        ],
    )
    r("s19_squeue_all.txt", ["squeue", "-a", "-l"])
    r("t01_scontrol_oneliner_show_node_d.txt", ["scontrol", "-o", "show", "node", "-d"])
    r("t02_sinfo_o_PaDTGN.txt", ["sinfo", "-o", "%P %a %D %T %G %N"])
    r("t03_scontrol_show_hostnames.txt", ["scontrol", "show", "hostnames", "node[1-2]"])
    r(
        "t04_sinfo_N_O_gpu_fields.txt",
        [
            "sinfo",
            "-N",
            "-h",
            "-O",
            "NodeHost:10,Partition:8,CPUsState:16,Gres:60,GresUsed:60,StateComplete:30",
        ],
    )
    r("t05_scontrol_show_step_d.txt", ["scontrol", "show", "step", "-d"])


def _data_parser(doc: str) -> str:
    """The data_parser plugin a JSON output was written by (its default layout), '' when unknown."""
    try:
        meta = json.loads(doc).get("meta", {})
        plugin = meta.get("plugin") or meta.get("plugins") or {}  # "plugins" in layouts before v0.0.40
    except (json.JSONDecodeError, AttributeError):
        return ""
    return str(plugin.get("data_parser") or "") if isinstance(plugin, dict) else ""


def _layout_captures(rec: Recorder, layout: str) -> None:
    """The jobs, nodes, steps and sinfo of an older layout this Slurm still writes (its default one is
    recorded once, above): parsers must read every layout a real cluster may be configured to print."""
    r = rec.run
    r(f"s05_scontrol_json_{layout}_show_job_d.json", ["scontrol", f"--json={layout}", "show", "job", "-d"])
    r(f"s01_squeue_json_{layout}.json", ["squeue", f"--json={layout}"])
    r(f"s07_scontrol_json_{layout}_show_node.json", ["scontrol", f"--json={layout}", "show", "node"])
    r(f"s04_sinfo_json_{layout}_nodes.json", ["sinfo", f"--json={layout}"])
    r(f"s13_scontrol_json_{layout}_show_steps.json", ["scontrol", f"--json={layout}", "show", "steps"])


def _errors(rec: Recorder, runner: Runner) -> None:
    r = rec.run
    rec.note("## --- refused requests (stderr) ---")
    for name, argv in (
        ("e11_sbatch_more_nodes_than_partition.txt", ["sbatch", "-t", "5", "-N", "3", "--wrap", "true"]),
        ("e12_sbatch_more_gpus_than_partition.txt", ["sbatch", "-t", "5", "--gpus=17", "--wrap", "true"]),
        ("e13_salloc_uid.txt", ["salloc", "--no-shell", "--immediate=2", "--uid=nobody", "-t", "5"]),
        (
            "e14_salloc_gres_and_gpus_per_node.txt",
            ["salloc", "--no-shell", "--immediate=2", "-t", "5", "--gres=gpu:1", "--gpus-per-node=1"],
        ),
    ):
        rc, o, e = r(name, argv, timeout=15)
        job = _job_id(o, e)
        if job:  # accepted by this version: its job must not stay behind
            runner.run(["scancel", job], check=False)


# The name and tag slurmlab gives an allocation (slurmlab.slurm.allocation.make_tag), fixed here so that
# the recorded job can stand for one a kernel submitted.
LIFE_NAMES = ("slurmlab-0123abcd", "slurmlab-4567cdef")
LIFE_TAGS = ("slurmlab:vm:4242:0123abcd", "slurmlab:vm:4242:4567cdef")
UNKNOWN_JOB = "999999"


class _Lines:
    """The stderr lines of a background salloc, read as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self._thread.start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            self.lines.append(raw)

    def wait_for(self, pattern: str, seconds: float) -> re.Match[str] | None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for line in list(self.lines):
                m = re.search(pattern, line)
                if m:
                    return m
            time.sleep(0.1)
        return None

    def done(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)


def _wait_reason(runner: Runner, job: str, seconds: float = 20) -> None:
    """Until the scheduler has said why ``job`` pends (its reason is None just after submission)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        res = runner.run(["squeue", "-h", "-j", job, "-o", "%r"], check=False)
        if res.stdout.strip() not in ("", "None"):
            return
        time.sleep(0.5)


def _blocker(rec: Recorder, name: str) -> str | None:
    """Every GPU of the 2-node sandbox taken, so that the next GPU request pends for Resources."""
    _, o, e = rec.run(
        name, ["salloc", "--no-shell", "-J", "blocker", "-t", "60", "-N", "2", "--gpus-per-node=8"]
    )
    return _job_id(o, e)


def _job_views(rec: Recorder, prefix: str, job: str, state: str) -> None:
    rec.run(
        f"{prefix}_squeue_brief_{state}.txt", ["squeue", "-h", "-t", "all", "-j", job, "-o", BRIEF_FORMAT]
    )
    rec.run(f"{prefix}_scontrol_show_job_d_{state}.txt", ["scontrol", "show", "job", "-d", job])
    rec.run(
        f"{prefix}_scontrol_json_show_job_d_{state}.json", ["scontrol", "--json", "show", "job", "-d", job]
    )


def _lifecycle(rec: Recorder, runner: Runner, sb: control.Sandbox) -> None:
    """One allocation as slurmlab submits and follows it: pending, granted, a step, cancelled; then a
    pending one withdrawn by SIGINT, unknown job ids, and a stopped controller (l* files)."""
    r = rec.run
    _end_jobs(runner)
    rec.note(
        "## --- one allocation's life, as slurmlab submits it (l*); ids in squeue/scontrol are this job's ---"
    )
    blocker = _blocker(rec, "l00_salloc_blocker.txt")
    argv = [
        "salloc",
        "--no-shell",
        f"--job-name={LIFE_NAMES[0]}",
        f"--comment={LIFE_TAGS[0]}",
        "--gpus=2",
        "-t",
        "10",
    ]
    proc = runner.popen(argv)
    lines = _Lines(proc)
    found = lines.wait_for(r"Pending job allocation (\d+)", 20)
    if found is None or blocker is None:
        proc.kill()
        raise RuntimeError(f"record-golden: salloc did not pend: {''.join(lines.lines)!r}")
    job = found.group(1)
    lines.wait_for("queued and waiting", 5)
    head = "".join(lines.lines)
    _wait_reason(runner, job)
    _job_views(rec, "l02", job, "pending")
    r(
        "l03_squeue_by_name.txt",
        ["squeue", "-h", "--me", "-t", "all", "-n", LIFE_NAMES[0], "-o", BRIEF_FORMAT],
    )
    r("l04_scancel_blocker.txt", ["scancel", blocker])
    rc = proc.wait(timeout=60)
    whole = lines.done()
    rec.save(
        "l01_salloc_pending.txt",
        argv,
        rc,
        "",
        head,
        note="stderr of this background salloc until it pends (the rest: l05)",
    )
    rec.save(
        "l05_salloc_granted.txt",
        argv,
        rc,
        "",
        whole[len(head) :],
        note="the same salloc's later stderr, once l04 freed the GPUs; its exit code",
    )
    _wait_state(runner, job, {"RUNNING"})
    _job_views(rec, "l06", job, "running")
    nodes = runner.run(["squeue", "-h", "-j", job, "-o", "%N"], check=False).stdout.strip()
    r("l07_sinfo_node_states.txt", ["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%T"])
    r("l08_squeue_owner.txt", ["squeue", "-h", "-t", "all", "-j", job, "-o", "%A|%U"])
    # what Allocation.srun runs: an --overlap step first (22.05 refuses it in a --gpus=N job), then without
    r("l09_srun_overlap_hostname.txt", ["srun", f"--jobid={job}", "--overlap", "hostname"], timeout=60)
    r("l10_srun_hostname.txt", ["srun", f"--jobid={job}", "hostname"], timeout=60)
    r("l11_scancel.txt", ["scancel", job])
    _wait_state(runner, job, {"CANCELLED"})
    _job_views(rec, "l12", job, "cancelled")

    blocker = _blocker(rec, "l13_salloc_blocker.txt")
    argv = [
        "salloc",
        "--no-shell",
        f"--job-name={LIFE_NAMES[1]}",
        f"--comment={LIFE_TAGS[1]}",
        "--gpus=2",
        "-t",
        "10",
    ]
    proc = runner.popen(argv)
    lines = _Lines(proc)
    found = lines.wait_for(r"Pending job allocation (\d+)", 20)
    lines.wait_for("queued and waiting", 5)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)  # how Allocation.cancel withdraws a pending salloc
    rc = proc.wait(timeout=30)
    rec.save(
        "l14_salloc_pending_interrupted.txt",
        argv,
        rc,
        "",
        lines.done(),
        note="SIGINT to its process group while it pended",
    )
    if found is not None:
        _wait_state(runner, found.group(1), {"CANCELLED"}, seconds=10)
        r(
            "l15_squeue_brief_interrupted.txt",
            ["squeue", "-h", "-t", "all", "-j", found.group(1), "-o", BRIEF_FORMAT],
        )
    if blocker:
        runner.run(["scancel", blocker], check=False)

    rec.note("## --- a job id the controller does not know ---")
    r(
        "l16_squeue_brief_unknown_job.txt",
        ["squeue", "-h", "-t", "all", "-j", UNKNOWN_JOB, "-o", BRIEF_FORMAT],
    )
    r("l17_scontrol_show_job_d_unknown_job.txt", ["scontrol", "show", "job", "-d", UNKNOWN_JOB])
    r("l18_scancel_unknown_job.txt", ["scancel", UNKNOWN_JOB])

    rec.note("## --- slurmctld stopped (SIGTERM), then restarted with every job ---")
    pid = sb.pids["slurmctld"]
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while time.monotonic() < end and Path(f"/proc/{pid}").exists() and "Z" not in _proc_state(pid):
        time.sleep(0.2)
    r(
        "l19_squeue_brief_controller_down.txt",
        ["squeue", "-h", "-t", "all", "-j", job, "-o", BRIEF_FORMAT],
        timeout=90,
    )
    r("l20_scontrol_show_job_d_controller_down.txt", ["scontrol", "show", "job", "-d", job], timeout=90)
    r("l21_scontrol_ping_controller_down.txt", ["scontrol", "ping"], timeout=90)
    r("l22_sinfo_version_controller_down.txt", ["sinfo", "--version"])
    # what %squeue, %sinfo, validation and the server ask of the whole cluster
    for name, argv in (
        ("l23_scontrol_show_job_d_controller_down.txt", ["scontrol", "show", "job", "-d"]),
        ("l24_scontrol_json_show_job_d_controller_down.json", ["scontrol", "--json", "show", "job", "-d"]),
        ("l25_scontrol_show_node_d_controller_down.txt", ["scontrol", "show", "node", "-d"]),
        ("l26_scontrol_json_show_node_controller_down.json", ["scontrol", "--json", "show", "node"]),
        ("l27_scontrol_show_partition_controller_down.txt", ["scontrol", "show", "partition"]),
        ("l28_squeue_owners_controller_down.txt", ["squeue", "-h", "-t", "all", "-o", "%A|%U"]),
    ):
        r(name, argv, timeout=90)
    sb.restart()


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _mig_and_threads(rec: Recorder, runner: Runner) -> None:
    r = rec.run
    rec.note("## --- h200-mig, 2 threads per core (x_*) ---")
    r("x01_salloc_mig.txt", ["salloc", "--no-shell", "-J", "migjob", "-t", "60", "--gres=gpu:1g.18gb:2"])
    r(
        "x02_salloc_mig_3g.txt",
        [
            "salloc",
            "--no-shell",
            "-J",
            "mig3g",
            "-t",
            "60",
            "--gpus=3g.71gb:1",
            "--cpus-per-gpu=4",
            "--mem-per-gpu=8G",
        ],
    )
    r(
        "x03_salloc_cores_socket1.txt",
        ["salloc", "--no-shell", "-J", "sock1", "-t", "60", "-n", "120", "--gpus=1g.18gb:1"],
    )
    r("x05_scontrol_json_show_job_d.json", ["scontrol", "--json", "show", "job", "-d"])
    r("x06_scontrol_show_job_d.txt", ["scontrol", "show", "job", "-d"])
    r("x07_scontrol_json_show_node.json", ["scontrol", "--json", "show", "node"])


def _end_jobs(runner: Runner, seconds: float = 20) -> None:
    """Cancel every job and wait until none runs: a job ended by slurmd leaves no slurmstepd behind."""
    ids = runner.run(["squeue", "-h", "-o", "%A"], check=False).stdout.split()
    if ids:
        runner.run(["scancel", *sorted(set(ids))], check=False)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not runner.run(
            ["squeue", "-h", "-t", "RUNNING,COMPLETING,SUSPENDED", "-o", "%A"], check=False
        ).stdout.strip():
            break
        time.sleep(0.5)
    time.sleep(1)  # the step daemons exit just after their job leaves the queue


# Recorded by hand, not by this script (a Slurm that still had salloc --uid): kept when the folder is
# re-recorded, with their section of commands.txt (from its "## --- ... recorded by hand" line on).
HAND_PREFIX = "hostile_"


def _hand_recorded(out: Path) -> str:
    commands = out / "commands.txt"
    lines = commands.read_text().splitlines(keepends=True) if commands.is_file() else []
    start = next(
        (i for i, line in enumerate(lines) if line.startswith("## ---") and "recorded by hand" in line),
        len(lines),
    )
    return "".join(lines[start:])


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser(
        __doc__,
        "It starts its own sandboxes (minutes) and replaces what the folder held before, but for the files "
        f"recorded by hand ({HAND_PREFIX}*).",
    )
    ap.add_argument(
        "out", type=Path, help="the folder to write, e.g. tests/data/slurm/24.11, inside its root"
    )
    out = ap.parse_args(argv).out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    by_hand = _hand_recorded(out)
    for old in out.iterdir():
        if old.is_file() and not old.name.startswith(HAND_PREFIX):
            old.unlink()
    with scratch("slg-", mode=0o700, keep=True) as work:
        os.chdir(work)
        record(out, work, by_hand)
    print(f"record-golden: wrote {len(list(out.iterdir()))} files to {out}")
    return 0


def record(out: Path, work: Path, by_hand: str) -> None:
    """The two sandboxes' recordings into ``out`` (``work`` holds the sandboxes), then ``by_hand`` after them
    in commands.txt."""
    control.load_profile = _threaded  # type: ignore[attr-defined]
    host = socket.gethostname()
    home = os.path.expanduser("~")
    sandboxes: list[control.Sandbox] = []
    steps: list[subprocess.Popen[str]] = []
    try:
        sb = control.Sandbox.up("dgx-h100", nodes=2, directory=work / "a")
        sandboxes.append(sb)
        rewrites = [
            (str(work / "a"), "/srv/sandbox"),
            (str(work / "b"), "/srv/sandbox2"),
            (str(work), "/home/user"),
            (home, "/home/user"),
            (host, "vm"),
        ]
        rec = Recorder(out, sb.runner(TIMEOUT), rewrites)
        jobout = work / "a" / "jobout"
        jobout.mkdir()
        steps, _batch = _workload(rec, rec.runner, jobout)
        _captures(rec)
        _errors(rec, rec.runner)
        for p in steps:
            p.terminate()
        _lifecycle(rec, rec.runner, sb)
        sb2 = control.Sandbox.up("h200-mig", nodes=1, directory=work / "b")
        sandboxes.append(sb2)
        rec.runner = sb2.runner(TIMEOUT)
        _mig_and_threads(rec, rec.runner)
        version = sb.version
        rec.write_commands(
            f"# Slurm {version[0]}.{version[1]:02d}: sandbox dgx-h100 x2 (/srv/sandbox) and h200-mig x1 with "
            "ThreadsPerCore=2 (/srv/sandbox2, x_* files), recorded by scripts/record-golden.py\n"
            "# <name> rc=<exit code> argv; stdout -> <name>, stderr -> <stem>.stderr (each only when not empty); "
            "JSON re-serialized on one line, content unchanged\n"
        )
        if by_hand:
            with (out / "commands.txt").open("a") as f:
                f.write(by_hand)
    finally:
        for p in steps:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for s in reversed(sandboxes):
            try:
                _end_jobs(s.runner(TIMEOUT))
                s.down()
            except SlurmlabError as exc:
                print(f"record-golden: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
