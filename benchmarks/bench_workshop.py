"""A full room on one machine (issue 31 point 5): thirty students of a real workshop at once.

    sudo .venv/bin/python benchmarks/bench_workshop.py [--seats 30] [--profile seed]

Rows, each beside a baseline measured in the same run:

* ``workshop up --seats 30`` (seats, a sandbox with accounting, the lessons, the hub), after the first set-up
  (slurmlab's built stand-ins and MariaDB's files in place: the baseline's start made them); baseline: ``sandbox
  up`` alone, the same profile with accounting.
* the class: every seat logs in through the hub's login form, asks for a token of its own through the hub's
  REST API (cookie and XSRF, as the browser does), spawns its server (a Slurm job through batchspawner, the
  spawn form's defaults: no GPU, 1 CPU and DefMemPerCPU), starts a real kernel on it through the single-user
  server's REST API and runs every code cell of lesson 00 (the student edition the seat was given: the
  answer cell is a comment) over the kernel's websocket, each cell's reply ``ok``. All thirty at once; the
  slowest beside one student alone (student01 first, on its own, its server then stopped). Each student's time
  is log-in to the last cell's reply. Every student has threads of their own for the blocking calls (asyncio's
  default pool would let only cpu_count() + 4 log in and wait for their servers at a time). A student who fails
  is printed with the end of their server's output and the hub's lines about them.
* the CPU the class used (the machine's busy CPU-seconds from ``/proc/stat``, so run it on a quiet machine) per
  student, beside one student alone's: 30 students on 2 cores cannot all finish sooner than the class's CPU over
  the cores, and the ratio row's note gives that floor.
* the memory of the whole class: the sum of the resident memory (RSS) of the class's processes (the seats' --
  servers, kernels, steps --, the hub, its proxy, the sandbox's daemons, MariaDB: everything run by a seat or
  naming the workshop folder, and their children), sampled each second while the class runs; its peak beside
  the 24 GiB of the target machine.
* the least any notebook service does per student, as a class of its own before the workshop starts: thirty bare
  Jupyter servers (no extension, no hub, no Slurm, no slurmlab) each starting a kernel and running one cell, all
  at once, the slowest beside one alone: the issue's "3x one alone" for that, on the same machine.
* ``workshop down``: its time, and what is left (a seat in /etc/passwd, a process of the class, a port the
  class listened on, the folder); baseline: ``sandbox down`` of the baseline's sandbox.

Lesson 00 asks for two GPUs where the seat's cap allows, one otherwise (its "What this lesson needs" cell): the
class runs with ``--gpu-cap 1`` (the workshop's default), so each seat holds one GPU at a time and the profile's
GPUs (seed: 4 nodes x 4 = 16) are shared by thirty: some seats wait for a GPU, which is part of the figure.
The servers take no GPU (the form's default), 30 CPUs of the profile's 192 and 30 GB of its 256.

Needs root (a workshop creates Unix accounts), jupyterhub, batchspawner and configurable-http-proxy, slurmdbd
and MariaDB; skipped otherwise, with the reason. It loads the machine for several minutes: run it on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.cookiejar
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, terminate_as_exit

GROUP = "a workshop of thirty (issue 31)"
REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
PREFIX = "benchseat"
MACHINE_GIB = 24
CELL_TIMEOUT_S = 300.0


def _skip_reason() -> str | None:
    from importlib.util import find_spec

    if os.geteuid() != 0:
        return "needs root (a workshop creates Unix accounts)"
    if find_spec("jupyterhub") is None or find_spec("batchspawner") is None:
        return "needs jupyterhub and batchspawner (pip install 'slurmlab[hub]')"
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub.control import find_proxy
    from slurmlab.testing.sandbox_fixtures import accounting_missing_reason

    missing = accounting_missing_reason()
    if missing:
        return missing
    try:
        find_proxy()
    except SlurmlabError as exc:
        return str(exc)
    return None


def _slurmlab(*argv: str, timeout: float = 600) -> tuple[float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(
        [PYTHON, "-m", "slurmlab", *argv], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"slurmlab {' '.join(argv)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return took, res.stdout


# ---- the class's processes and ports ------------------------------------------------------------------------
def _class_pids(folder: Path, uids: set[int]) -> set[int]:
    from slurmlab.sandbox import processes

    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid in uids or str(folder) in " ".join(processes.cmdline(int(entry.name))):
                found.add(int(entry.name))
    return found | processes.children_of(found)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _busy_cpu_s() -> float:
    """CPU-seconds the whole machine has spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class PeakMemory:
    """The class's summed RSS, sampled each second in a thread; ``peak`` and the process count then."""

    def __init__(self, folder: Path, uids: set[int]) -> None:
        self.folder, self.uids = folder, uids
        self.peak, self.processes = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def sample(self) -> None:
        pids = _class_pids(self.folder, self.uids)
        total = sum(_rss_bytes(p) for p in pids)
        if total > self.peak:
            self.peak, self.processes = total, len(pids)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _listening() -> dict[int, set[int]]:
    """port -> the pids listening on it (``ss -ltnpH``)."""
    text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=20, check=True).stdout
    ports: dict[int, set[int]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and ":" in fields[3]:
            port = int(fields[3].rsplit(":", 1)[1])
            ports.setdefault(port, set()).update(int(p) for p in re.findall(r"pid=(\d+)", line))
    return ports


def _class_ports(folder: Path) -> set[int]:
    """The ports the class's processes listen on (the hub, its proxy, the sandbox's daemons, the servers)."""
    pids = _class_pids(folder, set())
    return {port for port, owners in _listening().items() if owners & pids}


# ---- one student ------------------------------------------------------------------------------------------------
class Student:
    """One seat driving the real hub as a browser and a notebook would: login form, token, spawn, kernel."""

    def __init__(self, url: str, name: str, password: str) -> None:
        self.url, self.name, self.password = url, name, password
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.token = ""

    def _cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name and c.value), "")

    def log_in(self) -> None:
        page = self.opener.open(self.url + "/hub/login", timeout=60).read().decode()
        form = {"username": self.name, "password": self.password}
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)
        if xsrf:
            form["_xsrf"] = xsrf.group(1)
        self.opener.open(self.url + "/hub/login", urllib.parse.urlencode(form).encode(), timeout=60).read()
        if not self._cookie("jupyterhub-hub-login"):
            raise RuntimeError(f"{self.name}: the hub refused the login")
        # a token of the student's own, asked for with the login cookie (the hub checks XSRF on cookie calls)
        reply = self._hub("POST", f"/users/{self.name}/tokens", {"note": "bench"}, cookie=True)
        self.token = reply["token"]

    def _hub(self, method: str, path: str, body: Any = None, *, cookie: bool = False) -> Any:
        headers = {"Content-Type": "application/json"}
        if cookie:
            headers["X-XSRFToken"] = self._cookie("_xsrf")
        else:
            headers["Authorization"] = f"token {self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + "/hub/api" + path, data=data, method=method, headers=headers)
        text = self.opener.open(req, timeout=60).read().decode()
        return json.loads(text) if text.strip() else None

    def spawn(self, timeout: float = 600.0) -> None:
        self._hub("POST", f"/users/{self.name}/server", {"ngpus": "0", "runtime": "60", "partition": ""})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = (self._hub("GET", f"/users/{self.name}").get("servers") or {}).get("")
            if server and server.get("ready"):
                return
            if not server:
                raise RuntimeError(f"{self.name}: the server stopped while starting")
            time.sleep(1.0)
        raise RuntimeError(f"{self.name}: the server was not ready within {timeout:.0f} s")

    def server_api(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Authorization": f"token {self.token}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        url = f"{self.url}/user/{self.name}/api{path}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        text = urllib.request.urlopen(req, timeout=120).read().decode()
        return json.loads(text) if text.strip() else None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._hub("DELETE", f"/users/{self.name}/server")


async def _run_cells(student: Student, kernel_id: str, cells: list[str]) -> None:
    server = f"{student.url}/user/{student.name}"
    await _run_cells_at(server, student.token, student.name, kernel_id, cells)


async def _run_cells_at(server: str, token: str, who: str, kernel_id: str, cells: list[str]) -> None:
    """Run ``cells`` one by one on a kernel of the Jupyter server at ``server`` over its websocket, as the
    notebook does; a cell that does not end ``ok`` raises, naming ``who``."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws_url = server.replace("http://", "ws://") + f"/api/kernels/{kernel_id}/channels"
    conn = await websocket_connect(
        HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}, request_timeout=120)
    )
    session = uuid.uuid4().hex
    try:
        for number, code in enumerate(cells):
            msg_id = uuid.uuid4().hex
            header = {"msg_id": msg_id, "msg_type": "execute_request", "session": session}
            header.update(username=who, version="5.3", date="")
            content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
            content.update(allow_stdin=False, stop_on_error=True)
            msg = {
                "header": header,
                "parent_header": {},
                "metadata": {},
                "content": content,
                "channel": "shell",
            }
            await conn.write_message(json.dumps(msg))
            deadline = time.monotonic() + CELL_TIMEOUT_S
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"{who}: cell {number} gave no reply in {CELL_TIMEOUT_S:.0f} s")
                raw = await asyncio.wait_for(conn.read_message(), left)
                if raw is None:
                    raise RuntimeError(f"{who}: the kernel's websocket closed at cell {number}")
                reply = json.loads(raw)
                if reply.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if reply.get("msg_type") == "execute_reply":
                    status = reply["content"].get("status")
                    if status != "ok":
                        error = reply["content"].get("evalue", "")
                        raise RuntimeError(f"{who}: cell {number} ended {status}: {error}\n{code}")
                    break
    finally:
        conn.close()


def _lesson_cells(folder: Path) -> list[str]:
    notebook = json.loads((folder / "lessons" / "00-quickstart.ipynb").read_text())
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


async def _one_student(student: Student, cells: list[str]) -> float:
    t0 = time.perf_counter()
    await asyncio.to_thread(student.log_in)
    await asyncio.to_thread(student.spawn)
    kernel = await asyncio.to_thread(student.server_api, "POST", "/kernels", {"name": "python3"})
    try:
        await _run_cells(student, kernel["id"], cells)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(student.server_api, "DELETE", f"/kernels/{kernel['id']}")
    return time.perf_counter() - t0


async def _class(students: list[Student], cells: list[str]) -> list[float | BaseException]:
    _threads_for(len(students))
    return list(await asyncio.gather(*(_one_student(s, cells) for s in students), return_exceptions=True))


def _threads_for(students: int) -> None:
    """Give the running loop threads enough for every student's blocking calls at once (asyncio's default
    pool has os.cpu_count() + 4: on two cores six students would log in and wait for their servers while the
    others queued for a thread, and the class would not be at once)."""
    from concurrent.futures import ThreadPoolExecutor

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * students + 4))


# ---- the least a notebook service does per student -----------------------------------------------------------
# A Jupyter server with no extension (and jsonschema's IRI parsers kept out, as slurmlab's seats do), one
# kernel, one cell; no hub, no Slurm, no slurmlab. Its own class at once, beside one alone, is what the
# issue's "the slowest within 3x one alone" would be for the least any per-student notebook server costs.
_BARE_SERVER = (
    "import sys; sys.modules['rfc3987_syntax'] = None; "
    "from jupyter_server.serverapp import main; sys.exit(main())"
)


def _extensions_off() -> str:
    """The server option that turns off every server extension this environment enables (read once: the
    config folders are the same for every bare student, and reading them is no part of a student's time)."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    manager = ExtensionConfigManager(read_config_path=jupyter_config_path())
    off = {name: False for name in manager.get_jpserver_extensions()}
    return f"--ServerApp.jpserver_extensions={off!r}"


def _bare_server_argv(port: int, token: str, root: str, extensions_off: str) -> list[str]:
    argv = [PYTHON, "-c", _BARE_SERVER, "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
    argv += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root"]
    return [*argv, extensions_off]


async def _bare_student(number: int, extensions_off: str) -> float:
    import socket

    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    t0 = time.perf_counter()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = uuid.uuid4().hex
    root = tempfile.mkdtemp(prefix="slurmlab-bench-bare-")
    server = f"http://127.0.0.1:{port}"
    client = AsyncHTTPClient(force_instance=True)
    headers = {"Authorization": f"token {token}"}
    proc = await asyncio.create_subprocess_exec(
        *_bare_server_argv(port, token, root, extensions_off),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                await client.fetch(server + "/api/status", headers=headers, request_timeout=5)
                break
            except (OSError, HTTPClientError):
                if proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bare server {number} did not start") from None
                await asyncio.sleep(0.05)
        body = json.dumps({"name": "python3"})
        reply = await client.fetch(server + "/api/kernels", method="POST", body=body, headers=headers)
        kernel = json.loads(reply.body)
        await _run_cells_at(server, token, f"bare{number:02d}", kernel["id"], ["1 + 1"])
        return time.perf_counter() - t0
    finally:
        client.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()
        shutil.rmtree(root, ignore_errors=True)


async def _bare_class(students: int, extensions_off: str) -> list[float | BaseException]:
    runs = (_bare_student(n, extensions_off) for n in range(students))
    return list(await asyncio.gather(*runs, return_exceptions=True))


def _bare_rows(students: int) -> list[Row]:
    """The bare class at once beside one bare student alone: a row, the ratio the issue's target asks of."""
    extensions_off = _extensions_off()
    alone = asyncio.run(_bare_class(1, extensions_off))[0]
    if isinstance(alone, BaseException):
        return [Row(GROUP, f"bare Jupyter: skipped: one alone failed: {alone}", 0.0, "", note="skipped")]
    busy0 = _busy_cpu_s()
    results = asyncio.run(_bare_class(students, extensions_off))
    cpu = _busy_cpu_s() - busy0
    cores = os.cpu_count() or 1
    times = sorted(r for r in results if isinstance(r, float))
    failed = len(results) - len(times)
    slowest = times[-1] if times else float("nan")
    return [
        Row(
            GROUP,
            f"bare Jupyter, {students} at once (a server with no extension, a kernel, one cell; "
            "no hub, no Slurm, no slurmlab): the slowest, to one alone",
            slowest / alone,
            "x",
            None,
            alone,
            "one bare student alone (s)",
            f"{students} servers",
            f"slowest {slowest:.1f} s, {failed} failed; {cpu / max(1, len(times)):.2f} CPU-s each, the class's "
            f"CPU over {cores} cores {cpu / cores:.1f} s; the 3x target's ratio for the least a per-student "
            "server costs",
        )
    ]


# ---- the rows -------------------------------------------------------------------------------------------------
def _baseline_sandbox(base: Path, profile: str) -> tuple[float, float]:
    where = base / "baseline-sandbox"
    up, _ = _slurmlab("sandbox", "up", "--profile", profile, "--dir", str(where), "--accounting")
    down, _ = _slurmlab("sandbox", "down", "--dir", str(where))
    return up, down


def _passwords(out: str) -> dict[str, str]:
    shared = re.search(r"every seat \([^)]*\): (\S+)", out)
    if shared:
        return {"*": shared.group(1)}
    return dict(re.findall(rf"^\s+({PREFIX}\d+): (\S+)$", out, re.M))


def _class_rows(folder: Path, url: str, secrets: dict[str, str], seats: int) -> list[Row]:
    """One student alone, then all of them at once with the class's memory sampled: three rows."""
    names = [f"{PREFIX}{i:02d}" for i in range(1, seats + 1)]
    students = [Student(url, n, secrets.get(n) or secrets["*"]) for n in names]
    uids = {pwd.getpwnam(n).pw_uid for n in names}
    cells = _lesson_cells(folder)
    busy0 = _busy_cpu_s()
    alone = asyncio.run(_class(students[:1], cells))[0]
    cpu_alone = _busy_cpu_s() - busy0
    if isinstance(alone, BaseException):
        raise RuntimeError(f"one student alone failed: {alone}")
    students[0].stop()
    time.sleep(5)  # its job ends before the class starts
    students = [Student(url, s.name, s.password) for s in students]
    with PeakMemory(folder, uids) as memory:
        t0, busy0 = time.perf_counter(), _busy_cpu_s()
        results = asyncio.run(_class(students, cells))
        wall, cpu_class = time.perf_counter() - t0, _busy_cpu_s() - busy0
    for s in students:
        s.stop()
    failed = [(s.name, r) for s, r in zip(students, results, strict=True) if isinstance(r, BaseException)]
    for name, error in failed:  # what the seat's server and the hub said, before `down` removes them
        print(f"{name}: {error}\n{_seat_log_tail(name)}\n{_hub_log_lines(folder, name)}", file=sys.stderr)
    times = sorted(r for r in results if isinstance(r, float))
    slowest = times[-1] if times else float("nan")
    median = times[len(times) // 2] if times else float("nan")
    gib = memory.peak / 2**30
    said = f": {failed[0][0]}: {failed[0][1]}" if failed else ""
    # the CPU the class needs, spread over every core, is the least time its slowest student can take: how
    # far the ratio above can fall on this machine, whatever slurmlab does with the waits
    cores = os.cpu_count() or 1
    floor = cpu_class / cores
    floor_words = f"the class's CPU over {cores} cores: {floor:.0f} s, {floor / alone:.1f}x one alone"
    return [
        Row(
            GROUP,
            f"{seats} students, lesson 00 at once: completed",
            float(len(times)),
            "students",
            note=f"{len(failed)} failed{said}",
        ),
        Row(
            GROUP,
            f"{seats} students at once: the slowest, to one alone",
            slowest / alone,
            "x",
            3.0,
            alone,
            "one student alone (s)",
            f"{seats} seats",
            f"slowest {slowest:.1f} s, median {median:.1f} s, all done in {wall:.1f} s; "
            f"{len(cells)} code cells each; the floor, {floor_words}",
        ),
        Row(
            GROUP,
            "CPU per student, the class at once (machine-wide, /proc/stat)",
            cpu_class / max(1, len(times)),
            "CPU-s",
            None,
            cpu_alone,
            "one student alone (CPU-s)",
            f"{seats} seats",
            f"the class {cpu_class:.0f} CPU-s in {wall:.0f} s: the {cores} cores "
            f"{cpu_class / (wall * cores):.0%} busy",
        ),
        Row(
            GROUP,
            "memory of the whole class at its peak (summed RSS)",
            gib,
            "GiB",
            MACHINE_GIB * 0.75,
            float(MACHINE_GIB),
            "the machine (GiB)",
            f"{seats} seats",
            f"{memory.processes} processes then; {MACHINE_GIB - gib:.1f} GiB of {MACHINE_GIB} left",
        ),
    ]


def _seat_log_tail(name: str, lines: int = 60) -> str:
    """The end of the output of the seat's newest server job (the hub's batch script writes it in the home)."""
    logs = sorted(
        Path(pwd.getpwnam(name).pw_dir).glob(".slurmlab-hub-*.log"), key=lambda p: p.stat().st_mtime
    )
    if not logs:
        return f"(no server output in {name}'s home)"
    text = logs[-1].read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    return f"{logs[-1]}:\n" + "\n".join(text)


def _hub_log_lines(folder: Path, name: str, lines: int = 40) -> str:
    """The hub's last lines about one seat."""
    said = []
    for log in folder.rglob("hub.log"):
        text = log.read_text(encoding="utf-8", errors="replace").splitlines()
        said += [f"{log}: {line}" for line in text if name in line][-lines:]
    return "\n".join(said) or f"(the hub's log says nothing of {name})"


def _leftovers(folder: Path, seat_uids: set[int], class_ports: set[int]) -> str:
    """What ``down`` left of the class: seats in /etc/passwd or /etc/group, processes of a seat or naming the
    folder, a port the class listened on still listened on, the folder (other users' processes are not the
    class's: the machine is shared)."""
    left = []
    for table in ("/etc/passwd", "/etc/group"):
        names = re.findall(rf"^({PREFIX}\d+):", Path(table).read_text(), re.M)
        if names:
            left.append(f"{len(names)} seats in {table}")
    pids = _class_pids(folder, seat_uids)
    if pids:
        left.append(f"{len(pids)} processes")
    ports = sorted(class_ports & set(_listening()))
    if ports:
        left.append(f"ports {ports}")
    if folder.exists():
        left.append("the folder")
    return f"left: {', '.join(left) or 'nothing'} (the class listened on {len(class_ports)} ports)"


@terminate_as_exit()  # a SIGTERM takes the class down through the finally below, as Ctrl-C does
def run(seats: int, profile: str) -> list[Row]:
    base = Path(tempfile.mkdtemp(prefix="slurmlab-bench-workshop-", dir="/tmp"))
    base.chmod(0o755)
    folder = base / "class"
    seat_uids: set[int] = set()
    class_ports: set[int] = set()
    bare = _bare_rows(seats)
    sandbox_up, sandbox_down = _baseline_sandbox(base, profile)
    argv = ["--seats", str(seats), "--profile", profile, "--prefix", PREFIX, "--dir", str(folder)]
    try:
        up_s, out = _slurmlab("workshop", "up", *argv)
        rows = [
            Row(
                GROUP,
                f"workshop up --seats {seats} --profile {profile}",
                up_s,
                "s",
                60.0,
                sandbox_up,
                f"sandbox up --profile {profile} --accounting alone",
                f"{seats} seats",
            )
        ]
        url = re.search(r"JupyterHub on (http://\S+)", out)
        secrets = _passwords(out)
        if not url or not secrets:
            raise RuntimeError(f"workshop up printed no hub address or passwords:\n{out}")
        seat_uids = {pwd.getpwnam(f"{PREFIX}{i:02d}").pw_uid for i in range(1, seats + 1)}
        rows += _class_rows(folder, url.group(1), secrets, seats) + bare
    finally:
        down_s = float("nan")
        class_ports = _class_ports(folder)
        if (folder / "workshop.json").exists():
            down_s, _ = _slurmlab("workshop", "down", "--dir", str(folder))
        left = _leftovers(folder, seat_uids, class_ports)
        shutil.rmtree(base, ignore_errors=True)
    rows.append(
        Row(
            GROUP,
            "workshop down",
            down_s,
            "s",
            30.0,
            sandbox_down,
            "sandbox down alone",
            f"{seats} seats",
            left,
        )
    )
    return rows


def measure(quick: bool = False) -> list[Row]:
    """The workshop rows (skipped in --quick, and where the machine cannot hold a workshop: the reason)."""
    if quick:
        return [Row(GROUP, "skipped in --quick (starts a real workshop of thirty)", 0.0, "", note="skipped")]
    reason = _skip_reason()
    if reason:
        return [Row(GROUP, f"skipped: {reason}", 0.0, "", note="skipped")]
    return run(30, "seed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seats", type=int, default=30)
    ap.add_argument("--profile", default="seed")
    ap.add_argument("--bare", action="store_true", help="only the bare Jupyter class (no workshop, no root)")
    args = ap.parse_args()
    if args.bare:
        for row in _bare_rows(args.seats):
            print(json.dumps(row.to_dict()))
        return 0
    reason = _skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    for row in run(args.seats, args.profile):
        print(json.dumps(row.to_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
