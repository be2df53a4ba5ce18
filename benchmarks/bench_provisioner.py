"""slurmlab's kernel provisioner beside FZJ's jupyter-slurm-provisioner on the same sandbox (issue 30 point 5).

    python benchmarks/bench_provisioner.py

A benchmark, not a test: it installs FZJ's provisioner (the pinned version below, from PyPI) into a separate
virtual environment, build/bench-fzj-venv (made once, kept while the pins stay), with the same jupyter_client,
ipykernel and jupyter_server as the project's, so that only the provisioner differs. It starts a dgx-h100 sandbox
with accounting (FZJ's provisioner reads job and step ids from ``sacct``), and for each provisioner runs
benchmarks/_provisioner_driver.py, which starts one kernel through jupyter_client's AsyncKernelManager (as a
Jupyter server does) with a 1-GPU request:

* free cluster: ``start_kernel`` -> the first execute reply; then a normal shutdown, and the jobs left 15 s
  later (FZJ's provisioner cancels its allocation in a task 10 s after the kernel's end);
* full cluster: a job holds every GPU, the kernel is started, the job is cancelled after 10 s: the time from
  that release to the first reply, and what the manager could read while the kernel waited (the provisioner's
  log lines, and its state: slurmlab's ``status``, FZJ's ``state`` and the state it keeps for its frontend
  extension), in the row's note;
* forced server stop (the kernel started under a 3 s hold of every GPU, see KILL_HOLD_S): the kernel ready, ``kill -9`` of the process running the manager; 30 s later, the
  jobs left in squeue and the processes (of the driver's tree before the kill) still alive.

FZJ's provisioner needs two things of its site (JSC): ``/usr/libexec/jutil-exe`` to name the project's budget
account, and node names that resolve; the driver gives the sandbox's account and the nodes' NodeAddr for them
(``stand_in_for_the_site``). Its config (``project``, ``partition``, ``nodes``, ``runtime``, ``gpus``,
``kernel_argv``) is the kernel.json of its README. Takes about 3 minutes (2m39s-3m08s measured), each failed
start of either provisioner up to a minute more.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("_provisioner_driver.py")
GROUP = "kernel provisioner beside FZJ's"
FZJ = "jupyter-slurm-provisioner==0.6.0"
FZJ_NAME = "FZJ jupyter-slurm-provisioner 0.6.0"
# the project's own versions (pyproject.toml's ranges, as installed when this was written): only the
# provisioner differs between the two environments
PINS = (FZJ, "jupyter_client==8.10.0", "ipykernel==7.4.0", "jupyter_server==2.21.1", "requests==2.34.2")
FZJ_VENV = ROOT / "build" / "bench-fzj-venv"
HOLD_S = 10.0  # how long the GPUs stay taken after the kernel was started on a full cluster
AFTER_KILL_S = 30.0
# the forced stop's kernel starts under a short hold of every GPU: on a free sandbox the job runs at once and FZJ's
# provisioner asks sacct for its nodes before slurmdbd has them ("srun: error: Hostlist is empty!"), which the
# free-cluster row counts; a job that pended first gives slurmdbd its time (FZJ's 5 s polls), as on a busy cluster
KILL_HOLD_S = 3.0
READY_TIMEOUT_S = 60.0  # FZJ's provisioner waits 120 s for a step that failed at once: not worth waiting for
TRIES = 4  # a start that failed is tried again (its error is kept): one failure is a figure, not the end


def fzj_python() -> Path:
    """The Python of the environment with FZJ's provisioner, made (or remade when the pins changed)."""
    python = FZJ_VENV / "bin" / "python"
    stamp = FZJ_VENV / ".bench-pins"
    want = "\n".join(PINS)
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(FZJ_VENV)], check=True, timeout=300)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *PINS],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(PINS)} failed: {done.stderr.strip()[-2000:]}")
    stamp.write_text(want)
    return python


class Driver:
    """One run of the driver: its events as they come (JSON lines), read by a thread."""

    def __init__(self, python: Path, kernel: str, env: dict[str, str], log: Path, hold: bool = False) -> None:
        argv = [str(python), str(DRIVER), kernel, *(["--hold"] if hold else [])]
        self.log = log
        self.stderr = log.open("a")
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "output", "t": time.time(), "text": line.rstrip()}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "eof", "t": time.time()})
            self._cond.notify_all()

    def wait_for(self, names: tuple[str, ...], timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if event["event"] in (*names, "error", "eof"):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def first(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.events if e["event"] == name), None)

    def said(self, since: float, until: float) -> list[str]:
        """The distinct log lines and states seen between two moments, in order."""
        out: list[str] = []
        for e in self.events:
            if since <= e["t"] <= until and e["event"] in ("log", "status"):
                text = e["event"] + ": " + str(e.get("text", ""))
                if text not in out:
                    out.append(text)
        return out

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.stderr.close()
        tries = len(list(self.log.parent.glob(self.log.stem + "*.events.json")))
        self.log.with_name(f"{self.log.stem}-{tries + 1}.events.json").write_text(
            json.dumps(self.events, indent=1)
        )


class Bench:
    def __init__(self, sb: Any, folder: Path) -> None:
        self.sb = sb
        self.runner = sb.runner()
        self.folder = folder
        self.user = getpass.getuser()
        self.partition = self._partition()

    def _partition(self) -> str:
        out: list[str] = self.runner.run(["sinfo", "-h", "-o", "%P"]).stdout.split()
        return next((p.rstrip("*") for p in out if p.endswith("*")), out[0].rstrip("*"))

    def env(self, name: str) -> dict[str, str]:
        """The driver's environment: the sandbox's SLURM_CONF, a JUPYTER_PATH/runtime folder and HOME of its own
        (FZJ's provisioner keeps its state under $HOME), nothing of this process's Python."""
        home = self.folder / name
        (home / "share" / "kernels").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JPY_", "VIRTUAL_ENV"))}
        env.update(self.sb.env())
        env.update(
            HOME=str(home),
            JUPYTER_PATH=str(home / "share"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTER_CONFIG_DIR=str(home / "config"),
        )
        return env

    def spec(self, who: str, env: dict[str, str]) -> str:
        folder = Path(env["JUPYTER_PATH"]) / "kernels" / who
        folder.mkdir(parents=True, exist_ok=True)
        if who == "slurmlab":
            from slurmlab.provisioner import kernel_spec, request_from_config

            spec = kernel_spec(request_from_config({"gpus": 1, "time": 10, "partition": self.partition}))
        else:
            python = str(fzj_python())
            spec = {
                "display_name": "Slurm Kernel (FZJ)",
                "language": "python",
                "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "metadata": {
                    "kernel_provisioner": {
                        "provisioner_name": "slurm-provisioner",
                        "config": {
                            "gpus": "1",
                            "nodes": "1",
                            "partition": self.partition,
                            "project": "sandbox",
                            "reservation": "None",
                            "runtime": 10,
                            "jobid": "None",
                            "node": "None",
                            "kernel_argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                        },
                    }
                },
            }
            env["BENCH_PROVISIONER_SITE"] = json.dumps({"account": self.account(), "hosts": self.hosts()})
        (folder / "kernel.json").write_text(json.dumps(spec))
        return who

    def account(self) -> str:
        out = self.runner.run(
            ["sacctmgr", "-n", "-P", "show", "user", self.user, "format=defaultaccount"], check=False
        ).stdout
        return out.strip().splitlines()[0] if out.strip() else "research"

    def hosts(self) -> dict[str, str]:
        out = self.runner.run(["sinfo", "-h", "-N", "-o", "%N %o"]).stdout
        return dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)

    def python(self, who: str) -> Path:
        return Path(sys.executable) if who == "slurmlab" else fzj_python()

    def drive(self, who: str, case: str, hold: bool = False) -> Driver:
        env = self.env(f"{who}-{case}")
        kernel = self.spec(who, env)
        return Driver(self.python(who), kernel, env, self.folder / f"{who}-{case}.stderr", hold=hold)

    # ---- the queue -----------------------------------------------------------------------------
    def mine(self) -> list[str]:
        out = self.runner.run(["squeue", "-h", "-u", self.user, "-o", "%A %T"], check=False).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def clear(self) -> None:
        self.runner.run(["scancel", "-u", self.user], check=False)
        deadline = time.monotonic() + 60
        while self.mine() and time.monotonic() < deadline:
            time.sleep(0.5)

    def hold_every_gpu(self) -> str:
        nodes = len(self.hosts())
        out = self.runner.run(
            ["sbatch", "--parsable", f"-N{nodes}", "--gpus-per-node=8", "-J", "bench-hold", "-t", "10"]
            + [f"-p{self.partition}", "--wrap", "sleep 600"]
        ).stdout
        job: str = out.strip().split(";")[0]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = self.runner.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip()
            if state == "RUNNING":
                return job
            time.sleep(0.3)
        raise RuntimeError(f"the job holding every GPU ({job}) did not start")


def _elapsed(d: Driver, until: dict[str, Any] | None, since: float) -> float | None:
    return until["t"] - since if until is not None and until["event"] == "ready" else None


def _failure(d: Driver, got: dict[str, Any] | None) -> str:
    if got is None:
        return "no first reply within the timeout"
    if got["event"] == "error":
        return f"{got['where']}: {got['text']}"
    tail = [e.get("text", "") for e in d.events if e["event"] == "log"][-3:]
    return "the driver ended before the kernel was ready: " + " | ".join(tail)


def free_case(b: Bench, who: str) -> dict[str, Any]:
    b.clear()
    d = b.drive(who, "free")
    try:
        got = d.wait_for(("ready",), READY_TIMEOUT_S)
        begin = d.first("begin")
        result: dict[str, Any] = {"ready_s": _elapsed(d, got, begin["t"]) if begin else None}
        if result["ready_s"] is None:
            result["error"] = _failure(d, got)
            return result
        result["printed"] = got["printed"] if got else ""
        d.wait_for(("exit",), 90)
        result["left_after_shutdown"] = len(b.mine())
        return result
    finally:
        d.end()
        b.clear()


def full_case(b: Bench, who: str) -> dict[str, Any]:
    b.clear()
    holder = b.hold_every_gpu()
    d = b.drive(who, "full")
    try:
        begin = d.wait_for(("begin",), 60)
        time.sleep(HOLD_S)
        released = time.time()
        b.runner.run(["scancel", holder], check=False)
        got = d.wait_for(("ready",), READY_TIMEOUT_S)
        result: dict[str, Any] = {
            "pending": d.said(begin["t"] if begin else 0.0, released),
            "after_release_s": _elapsed(d, got, released),
        }
        if result["after_release_s"] is None:
            result["error"] = _failure(d, got)
        return result
    finally:
        d.end()
        b.clear()


def _processes() -> tuple[dict[int, int], dict[int, str]]:
    """Every process: pid -> parent pid, pid -> command line."""
    parents: dict[int, int] = {}
    lines: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        lines[int(entry.name)] = cmd
    return parents, lines


def _tree(pid: int, folder: Path) -> dict[int, str]:
    """The process's descendants, and the processes naming the case's folder (the kernel on the node is
    slurmstepd's child, not the manager's; its connection file is in that folder): pid -> command line."""
    parents, lines = _processes()
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    tree |= {p for p, cmd in lines.items() if str(folder) in cmd and "_provisioner_driver" not in cmd}
    tree.discard(pid)
    return {p: lines.get(p, "") for p in tree}


def _short(cmd: str) -> str:
    """A process's program and what it runs (srun's options left out)."""
    words = cmd.split()
    program = Path(words[0]).name if words else "?"
    runs = next((w for w in words if w in ("ipykernel_launcher", "slurmlab.slurm.guardian")), "")
    return f"{program} {runs}".strip()


def _alive(pid: int, cmd: str) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and now == cmd


def kill_case(b: Bench, who: str) -> dict[str, Any]:
    b.clear()
    holder = b.hold_every_gpu()
    d = b.drive(who, "kill", hold=True)
    left: dict[int, str] = {}
    try:
        d.wait_for(("begin",), 60)
        time.sleep(KILL_HOLD_S)
        b.runner.run(["scancel", holder], check=False)
        got = d.wait_for(("ready",), READY_TIMEOUT_S)
        if got is None or got["event"] != "ready":
            return {"error": _failure(d, got)}
        time.sleep(1.0)
        tree = _tree(d.proc.pid, b.folder / f"{who}-kill")
        before = b.mine()
        os.kill(d.proc.pid, signal.SIGKILL)
        time.sleep(AFTER_KILL_S)
        jobs = b.mine()
        left = {p: c for p, c in tree.items() if _alive(p, c)}
        return {
            "jobs_before": before,
            "jobs_left": jobs,
            "processes_before": [_short(c) for c in tree.values()],
            "processes_left": [_short(c) for c in left.values()],
        }
    finally:
        d.end()
        b.clear()
        for (
            pid,
            cmd,
        ) in left.items():  # the kernel's processes this benchmark started and the kill left behind
            if _alive(pid, cmd):
                os.kill(pid, signal.SIGKILL)


def _rows(runs: dict[str, dict[str, dict[str, Any]]], size: str) -> list[Row]:
    ours, theirs = runs["slurmlab"], runs["fzj"]

    def row(name: str, case: str, key: str, unit: str, target: float | None = None, note: str = "") -> Row:
        value = ours[case].get(key)
        base = theirs[case].get(key)
        value = len(value) if isinstance(value, list) else value
        base = len(base) if isinstance(base, list) else base
        errors = [
            f"{who}: {len(r[case]['failed_tries'])} failed start(s): {' / '.join(r[case]['failed_tries'])}"
            for who, r in runs.items()
            if r[case].get("failed_tries")
        ]
        return Row(
            GROUP,
            name,
            float("nan") if value is None else float(value),
            unit,
            target=target,
            baseline=None if base is None else float(base),
            baseline_name=FZJ_NAME,
            size=size,
            note="; ".join([note, *errors]).strip("; "),
        )

    def said(case: dict[str, Any]) -> str:
        return " | ".join(case.get("pending", [])) or "(nothing)"

    def procs(case: dict[str, Any]) -> str:
        return ", ".join(case.get("processes_left", [])) or "none"

    return [
        row(
            "start -> first reply, free cluster (1 GPU)",
            "free",
            "ready_s",
            "s",
            note=f"the first cell printed SLURM_JOB_ID SLURM_STEP_ID: {ours['free'].get('printed', '')!r}",
        ),
        row("jobs left 15 s after a normal shutdown", "free", "left_after_shutdown", "jobs", target=0),
        row(
            f"GPUs released -> first reply, full cluster (all GPUs held {HOLD_S:g} s)",
            "full",
            "after_release_s",
            "s",
        ),
        row(
            "lines the manager could read while pending",
            "full",
            "pending",
            "lines",
            note=f"slurmlab: {said(ours['full'])} || FZJ: {said(theirs['full'])}",
        ),
        row(
            f"jobs in squeue {AFTER_KILL_S:g} s after kill -9 of the server",
            "kill",
            "jobs_left",
            "jobs",
            target=0,
        ),
        row(
            f"processes alive {AFTER_KILL_S:g} s after kill -9 of the server",
            "kill",
            "processes_left",
            "processes",
            target=0,
            note=f"slurmlab: {procs(ours['kill'])} || FZJ: {procs(theirs['kill'])}",
        ),
        Row(
            GROUP,
            "starts that failed (each case tried again, up to " + f"{TRIES} times, until one started)",
            float(failures(ours)),
            "starts",
            target=0,
            baseline=float(failures(theirs)),
            baseline_name=FZJ_NAME,
            size=size,
            note=f"slurmlab: {starts(ours)} starts || FZJ: {starts(theirs)} starts",
        ),
    ]


def failures(cases: dict[str, dict[str, Any]]) -> int:
    return sum(len(c.get("failed_tries", [])) for c in cases.values())


def starts(cases: dict[str, dict[str, Any]]) -> int:
    return failures(cases) + sum(1 for c in cases.values() if not c.get("error"))


def attempts(case: Callable[[Bench, str], dict[str, Any]], b: Bench, who: str) -> dict[str, Any]:
    """The case, tried again (up to TRIES times) when the kernel did not start; the failed tries are kept."""
    failed: list[str] = []
    for _ in range(TRIES):
        result = case(b, who)
        if not result.get("error"):
            break
        failed.append(result["error"])
    result["failed_tries"] = failed
    return result


def run() -> list[Row]:
    from slurmlab.sandbox import Sandbox

    fzj_python()  # before the sandbox: a failed install costs no Slurm start
    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-provisioner-") as d:
        (Path(d) / "sandbox").mkdir()
        # accounting on (FZJ's provisioner reads sacct) without the per-user GPU caps: one job holds every GPU
        sb = Sandbox.up(profile="dgx-h100", directory=Path(d) / "sandbox", accounting=None)
        try:
            b = Bench(sb, Path(d))
            size = f"Slurm {sb.version[0]}.{sb.version[1]:02d}, dgx-h100 x {len(b.hosts())}"
            runs: dict[str, dict[str, dict[str, Any]]] = {}
            for who in ("slurmlab", "fzj"):
                runs[who] = {}
                for case, fn in (("free", free_case), ("full", full_case), ("kill", kill_case)):
                    runs[who][case] = attempts(fn, b, who)
                    print(f"{who} {case}: {json.dumps(runs[who][case])}", file=sys.stderr, flush=True)
            keep = ROOT / "build" / "bench-provisioner"
            shutil.rmtree(keep, ignore_errors=True)
            keep.mkdir(parents=True)
            (keep / "runs.json").write_text(json.dumps(runs, indent=2))
            for kept in [*Path(d).glob("*.stderr*"), *Path(d).glob("*.events.json")]:
                shutil.copy(kept, keep / kept.name)
            return _rows(runs, size)
        finally:
            sb.down()


def measure(quick: bool = False) -> list[Row]:
    """The comparison on a real sandbox (skipped in --quick: no Slurm there, and it installs from PyPI)."""
    if quick:
        return [
            Row(GROUP, "provisioner rows skipped in --quick (starts a real Slurm)", 0.0, "", note="skipped")
        ]
    return run()


def main() -> int:
    for r in run():
        base = "" if r.baseline is None else f"  (FZJ: {r.baseline:g})"
        print(f"{r.name}: {r.value:g} {r.unit}{base}" + (f"\n    {r.note}" if r.note else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
