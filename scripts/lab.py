"""``make lab``: a local Slurm sandbox and JupyterLab on the workshop notebooks, pointed at it; Ctrl-C stops both.

    .venv/bin/python scripts/lab.py [--profile dgx-h100] [--dir build/lab] [--ip 127.0.0.1] [--port 8888] [--dry-run]

Copies the workshop notebooks into a working folder (so running them never dirties the repository's copies;
a notebook changed there is kept), starts the sandbox (or reuses the one running in its folder), starts
JupyterLab there with the sandbox's environment (``SLURM_CONF``) so ``%salloc`` works at once, and prints the URL
with its token once the server answers. On Ctrl-C (or SIGTERM/SIGHUP, or when JupyterLab exits) it stops
JupyterLab, its kernels and whatever they started, then the sandbox it started, and checks nothing is left.

Settings from the environment (the Makefile passes them through): ``SLURMLAB_LAB_IP`` (default 127.0.0.1: only
this machine can connect), ``SLURMLAB_LAB_PORT`` (default: the first free port from 8888), ``SLURMLAB_LAB_DIR``
(default build/lab), ``SLURMLAB_PROFILE`` (default dgx-h100), ``SLURMLAB_SANDBOX_DIR`` (default: the profile's
usual folder).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from slurmlab.commands.notebooks import copy_notebooks, shipped_notebooks
from slurmlab.errors import SlurmlabError
from slurmlab.sandbox import DEFAULT_PROFILE, Sandbox, load_profile, processes
from slurmlab.sandbox.folder import default_directory

REPO = Path(__file__).resolve().parents[1]
FIRST_PORT = 8888
READY_TIMEOUT = 90.0  # JupyterLab's first start builds its settings; later ones answer in a few seconds
STOP_GRACE = 20.0  # kernels release their allocations on a clean shutdown: give them time to


@dataclass(frozen=True)
class LabPlan:
    profile: str
    sandbox_dir: Path
    notebook_dir: Path
    ip: str
    port: int
    token: str

    @property
    def url(self) -> str:
        host = socket.gethostname() if self.ip in ("0.0.0.0", "::", "") else self.ip
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/lab?token={self.token}"

    @property
    def probe_url(self) -> str:
        host = "127.0.0.1" if self.ip in ("0.0.0.0", "") else "::1" if self.ip == "::" else self.ip
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/api/status?token={self.token}"

    def jupyter_argv(self) -> list[str]:
        # the token travels in JUPYTER_TOKEN (the environment is the owner's alone), not on the command line
        argv = [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            f"--ServerApp.ip={self.ip}",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={self.notebook_dir}",
        ]
        # the sandbox runs as root too (containers, CI machines); JupyterLab refuses root unless told
        return [*argv, "--allow-root"] if os.geteuid() == 0 else argv

    def jupyter_env(self, sandbox_env: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
        return {**base, **sandbox_env, "JUPYTER_TOKEN": self.token}


def port_is_free(ip: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((ip, port))
        except OSError:
            return False
    return True


def choose_port(ip: str, asked: int | None) -> int:
    if asked is not None:
        if not port_is_free(ip, asked):
            raise SlurmlabError(
                f"port {asked} on {ip} is in use",
                hint="choose another: SLURMLAB_LAB_PORT=8899 make lab (or leave it unset for a free one)",
            )
        return asked
    for port in range(FIRST_PORT, FIRST_PORT + 100):
        if port_is_free(ip, port):
            return port
    raise SlurmlabError(
        f"no free port from {FIRST_PORT} to {FIRST_PORT + 99} on {ip}",
        hint="name one: SLURMLAB_LAB_PORT=PORT make lab",
    )


def make_plan(argv: Sequence[str] | None, environ: Mapping[str, str]) -> tuple[LabPlan, bool]:
    parser = argparse.ArgumentParser(prog="make lab", description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--profile",
        default=environ.get("SLURMLAB_PROFILE") or DEFAULT_PROFILE,
        help="sandbox hardware profile (env SLURMLAB_PROFILE; `slurmlab sandbox profiles`)",
    )
    parser.add_argument(
        "--sandbox-dir",
        default=environ.get("SLURMLAB_SANDBOX_DIR") or None,
        help="the sandbox's folder (env SLURMLAB_SANDBOX_DIR)",
    )
    parser.add_argument(
        "--dir",
        default=environ.get("SLURMLAB_LAB_DIR") or str(REPO / "build" / "lab"),
        help="where the notebooks are copied and JupyterLab opens (env SLURMLAB_LAB_DIR)",
    )
    parser.add_argument(
        "--ip",
        default=environ.get("SLURMLAB_LAB_IP") or "127.0.0.1",
        help="address JupyterLab listens on (env SLURMLAB_LAB_IP; 0.0.0.0 lets others in)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(environ["SLURMLAB_LAB_PORT"]) if environ.get("SLURMLAB_LAB_PORT", "").isdigit() else None,
        help="its port (env SLURMLAB_LAB_PORT; default the first free one from 8888)",
    )
    parser.add_argument("--dry-run", action="store_true", help="say what it would do and start nothing")
    args = parser.parse_args(argv)
    load_profile(args.profile)  # a misspelt profile is named, with the known ones, before anything starts
    sandbox_dir = Path(args.sandbox_dir) if args.sandbox_dir else default_directory(args.profile)
    plan = LabPlan(
        args.profile,
        sandbox_dir.absolute(),
        Path(args.dir).expanduser().absolute(),
        args.ip,
        choose_port(args.ip, args.port),
        secrets.token_hex(24),
    )
    return plan, args.dry_run


def describe(plan: LabPlan) -> str:
    return "\n".join(
        [
            "make lab would:",
            f"  copy the workshop notebooks to {plan.notebook_dir} (keeping any you changed there)",
            f"  start the sandbox {plan.profile} in {plan.sandbox_dir} (or reuse it if it runs)",
            f"  start JupyterLab with SLURM_CONF={plan.sandbox_dir / 'slurm.conf'}:",
            f"    {shlex.join(plan.jupyter_argv())}",
            f"  print its URL: {plan.url.replace(plan.token, '<token>')}",
            "  on Ctrl-C: stop JupyterLab and its kernels, then the sandbox; nothing is left running",
        ]
    )


class Interrupted(Exception):
    """SIGTERM or SIGHUP: ended like Ctrl-C."""


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signal.Signals(signum).name)


def _die_with_parent() -> None:
    """In the JupyterLab child, before exec: SIGTERM it when this script dies, even by SIGKILL (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def wait_ready(plan: LabPlan, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-8:]
            raise SlurmlabError(
                "JupyterLab exited at start:\n    " + "\n    ".join(tail), hint=f"the whole log is {log}"
            )
        with contextlib.suppress(urllib.error.URLError, OSError):
            with urllib.request.urlopen(plan.probe_url, timeout=2) as answer:
                if answer.status == 200:
                    return
        time.sleep(0.3)
    raise SlurmlabError(
        f"JupyterLab did not answer on port {plan.port} within {READY_TIMEOUT:.0f} s",
        hint=f"see its log: {log}",
    )


def stop_jupyter(proc: subprocess.Popen[bytes]) -> list[int]:
    """Stop JupyterLab (it shuts its kernels down, which release their allocations), then everything it
    started that is still there. Returns the pids that would not stop (should be none)."""
    below = processes.children_of([proc.pid]) - {proc.pid}
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    # kernels, their steps and guardians finish their own release first; what lingers is stopped
    deadline = time.monotonic() + 10
    while any(processes.alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes.stop([p for p in below if processes.alive(p)], grace=5.0)


def serve(plan: LabPlan) -> int:
    if plan.notebook_dir.resolve() == (REPO / "notebooks").resolve():
        print(f"notebooks: the repository's own, in {plan.notebook_dir}: commit them without outputs")
    else:
        copied = copy_notebooks(shipped_notebooks(), plan.notebook_dir, keep_changed=True)
        print(
            f"notebooks: {plan.notebook_dir} ({len(copied.writes(False))} copied, {len(copied.same)} already "
            "there)"
        )
        for name in copied.changed:
            print(f"  kept your changed {name} (delete it to get the shipped one back)")
    print(f"starting the sandbox {plan.profile} (usually 15-70 s) …", flush=True)
    sb = Sandbox.up(profile=plan.profile, directory=plan.sandbox_dir)
    print(
        f"sandbox {sb.profile_name}: {len(sb.nodes)} nodes ({', '.join(sb.nodes)}), Slurm {sb.release}, "
        f"SLURM_CONF={sb.conf_path}"
        + (" (it was already running: left running at the end)" if sb.reused else "")
    )
    log = plan.notebook_dir / ".jupyterlab.log"  # hidden: JupyterLab's file browser lists the notebooks only
    proc: subprocess.Popen[bytes] | None = None
    code = 0
    try:
        with open(log, "wb") as out:
            # its own session: the terminal's Ctrl-C reaches this script only, which stops JupyterLab in order
            proc = subprocess.Popen(
                plan.jupyter_argv(),
                cwd=plan.notebook_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                env=plan.jupyter_env(sb.env(), os.environ),
            )
        print(f"JupyterLab (pid {proc.pid}) is starting; its log: {log}", flush=True)
        wait_ready(plan, proc, log)
        print(
            f"\nopen JupyterLab: {plan.url}\n"
            f"  notebooks in {plan.notebook_dir}; %salloc in them uses the sandbox {sb.profile_name}\n"
            "  press Ctrl-C here to stop JupyterLab and the sandbox\n",
            flush=True,
        )
        code = proc.wait()
        print(f"JupyterLab exited ({code})")
    except (KeyboardInterrupt, Interrupted) as exc:
        print(f"\n{str(exc) or 'Ctrl-C'}: stopping JupyterLab and the sandbox …", flush=True)
    except SlurmlabError as exc:
        print(f"make lab: {exc}", file=sys.stderr)
        code = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        left = stop_jupyter(proc) if proc is not None else []
        if not sb.reused:
            sb.down()
        if left:
            print(
                f"make lab: still running after the stop: pids {', '.join(map(str, left))}", file=sys.stderr
            )
            code = code or 1
        else:
            print(
                "JupyterLab "
                + (
                    "stopped; the sandbox was left running, as it was before"
                    if sb.reused
                    else f"and the sandbox {sb.profile_name} stopped"
                )
                + "; nothing of this run is left running"
            )
    return code


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C stops everything even where the shell started this with SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    try:
        plan, dry_run = make_plan(argv, os.environ)
        if dry_run:
            print(describe(plan))
            return 0
        return serve(plan)
    except (KeyboardInterrupt, Interrupted):
        print(
            "\nstopped before JupyterLab started; nothing is left running"
        )  # Sandbox.up cleans up after itself
        return 130
    except SlurmlabError as exc:
        print(f"make lab: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
