"""A workshop of three on the sandbox (issue 31 point 1): ``slurmlab workshop up`` makes exactly three seats with
their lessons, a class account with a per-student GPU cap and a hub they log in to; ``reset`` cancels the
class's jobs and puts back only the lessons nobody changed; ``down`` leaves no user, process, port or file.

Marked ``serial``: it adds and removes Unix accounts (``/etc/passwd``) and reads the whole process table and the
listening ports, which other workers' tests would change under it.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from slurmlab.cli import main
from slurmlab.testing.sandbox_fixtures import accounting_missing_reason

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.serial,
    pytest.mark.skipif(os.geteuid() != 0, reason="a workshop creates Unix accounts: it needs root"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser (util-linux)"),
    pytest.mark.skipif(
        find_spec("jupyterhub") is None or find_spec("batchspawner") is None,
        reason="pip install 'slurmlab[hub]' (make setup installs it)",
    ),
]

PREFIX = "student"
SEATS = ("student01", "student02", "student03")
CAP = 1


@pytest.fixture(scope="module")
def workshop() -> Iterator[dict[str, Any]]:
    missing = accounting_missing_reason()
    if missing:
        pytest.skip(missing)
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub.control import find_proxy

    try:
        find_proxy()
    except SlurmlabError as exc:
        pytest.skip(str(exc))
    taken = [n for n in SEATS if _user_exists(n)]
    if taken:
        pytest.skip(f"users {taken} exist on this machine: the workshop refuses to take them over")
    # under /tmp (open to all), not pytest's 0700 tmp_path: the students must reach their homes and the sandbox
    base = Path(tempfile.mkdtemp(prefix="slurmlab-workshop-test-", dir="/tmp"))
    base.chmod(0o755)
    try:
        folder = base / "class"
        settings = base / "form.json"
        settings.write_text(json.dumps({"ngpus": {"value": 1, "locked": True}, "runtime": {"value": "10"}}))
        before = {
            "ports": _listening(),
            "passwd": Path("/etc/passwd").read_text(),
            "group": Path("/etc/group").read_text(),
        }
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(
                [
                    "workshop", "up", "--seats", "3", "--profile", "seed", "--nodes", "2", "--gpu-cap", str(CAP),
                    "--password-mode", "per-seat", "--reservation", "--settings", str(settings), "--dir", str(folder),
                ]
            )  # fmt: skip
        printed = out.getvalue()
        assert code == 0, printed
        passwords = dict(re.findall(r"^  (student\d\d): (\S+)$", printed, re.M))
        from slurmlab.workshop import Workshop

        yield {
            "shop": Workshop.find(folder),
            "folder": folder,
            "passwords": passwords,
            "printed": printed,
            "before": before,
        }
    finally:
        # whatever happened (an up that failed half-way too): down removes what was made, then the test's folder
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(Exception, SystemExit):
            main(["workshop", "down", "--dir", str(base / "class")])
        shutil.rmtree(base, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _listening() -> dict[int, set[int]]:
    """port -> pids listening on it (``ss -ltnpH``)."""
    text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=20, check=True).stdout
    ports: dict[int, set[int]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and ":" in fields[3]:
            port = int(fields[3].rsplit(":", 1)[1])
            ports.setdefault(port, set()).update(int(p) for p in re.findall(r"pid=(\d+)", line))
    return ports


def _class_pids(folder: Path, uids: set[int]) -> set[int]:
    """The processes of the class: run by a seat, or naming the workshop's folder, and all below them."""
    from slurmlab.sandbox import processes

    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid in uids or str(folder) in " ".join(processes.cmdline(int(entry.name))):
                found.add(int(entry.name))
    return found | processes.children_of(found)


def _sacctmgr(shop: Any, *args: str) -> list[list[str]]:
    res = shop.runner().run(["sacctmgr", "-n", "-P", "show", *args], timeout=20)
    return [line.split("|") for line in res.stdout.splitlines() if line.strip()]


def _log_in(url: str, user: str, password: str) -> bool:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(url + "/hub/login", timeout=20).read().decode()
    form = {"username": user, "password": password}
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)
    if xsrf:
        form["_xsrf"] = xsrf.group(1)
    with contextlib.suppress(urllib.error.HTTPError):  # a refused login answers 403
        opener.open(url + "/hub/login", urllib.parse.urlencode(form).encode(), timeout=20)
    return any(c.name == "jupyterhub-hub-login" for c in jar)


def _as_seat(shop: Any, name: str, argv: list[str]) -> str:
    """Submit as the seat, in the class's reservation (the seats' jobs run on its nodes only there)."""
    home = shop.home(name)
    runuser = shutil.which("runuser") or "runuser"
    extra = [f"--chdir={home}", "--output=/dev/null", "--reservation=workshop"]
    res = shop.runner().run([runuser, "-u", name, "--", *argv, *extra])
    return str(res.stdout.strip().split()[-1])


def _wait_reason(shop: Any, job_id: str, timeout: float = 40.0) -> str:
    """The job's pending reason once the scheduler has looked at its limits: a fresh job waits with no reason,
    and on 24.11 first with Priority (behind the jobs before it) until a pass checks it against its QOS."""
    deadline = time.monotonic() + timeout
    reason = ""
    while time.monotonic() < deadline:
        reason = next((j.reason for j in shop.jobs() if j.job_id == job_id), "")
        if reason not in ("", "None", "Priority"):
            return reason
        time.sleep(0.5)
    return reason


def _slurm_says(shop: Any, *jobs: str) -> str:
    """Slurm's own record of ``jobs`` (scontrol show job) and the class's QOS as sacctmgr has it."""
    runner = shop.runner()
    said = [runner.run(["scontrol", "show", "job", job], timeout=20, check=False).stdout for job in jobs]
    qos = runner.run(
        ["sacctmgr", "-n", "-P", "show", "qos", "format=name,maxtrespu"], timeout=20, check=False
    )
    return "\n".join([*said, "QOS: " + qos.stdout.strip(), "queue: " + repr(shop.jobs())])


def test_up_makes_exactly_three_seats_with_their_lessons_accounts_and_a_hub(workshop: dict[str, Any]) -> None:
    shop, folder = workshop["shop"], workshop["folder"]
    seats = sorted(
        line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines() if line.startswith(PREFIX)
    )
    assert seats == list(SEATS)
    lessons = sorted(p.name for p in (Path(__file__).parents[3] / "notebooks").glob("*.ipynb"))
    for name in SEATS:
        entry = pwd.getpwnam(name)
        home = Path(entry.pw_dir)
        assert home == folder / "home" / name
        assert home.stat().st_uid == entry.pw_uid and (home.stat().st_mode & 0o777) == 0o700
        given = sorted(p.name for p in (home / "lessons").iterdir())
        assert given == lessons
        assert all((home / "lessons" / n).stat().st_uid == entry.pw_uid for n in given)
    # no Unix password: the seats log in to the hub only
    shadow = {line.split(":")[0]: line.split(":")[1] for line in Path("/etc/shadow").read_text().splitlines()}
    assert all(shadow[n].startswith("!") for n in SEATS)

    assocs = {(a[1], a[0]): a for a in _sacctmgr(shop, "assoc", "format=account,user,qos,defaultqos") if a[1]}
    for name in SEATS:
        assert (name, "workshop") in assocs, assocs
        assert assocs[(name, "workshop")][2:] == ["workshop", "workshop"]
        assert not [k for k in assocs if k[0] == name and k[1] != "workshop"], "a seat in another account"
    users = dict(_sacctmgr(shop, "user", "format=user,defaultaccount"))
    assert all(users[n] == "workshop" for n in SEATS)
    qos = dict(_sacctmgr(shop, "qos", "format=name,maxtrespu"))
    assert qos["workshop"] == f"gres/gpu={CAP}"

    # each seat logs in with its own password, not another seat's; the passwords are kept only as hashes
    url = shop.hub().url
    passwords = workshop["passwords"]
    assert sorted(passwords) == list(SEATS) and len(set(passwords.values())) == 3
    assert _log_in(url, "student01", passwords["student01"])
    assert not _log_in(url, "student01", passwords["student02"])
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.stat().st_size < 1_000_000:
            data = path.read_bytes()
            assert not any(p.encode() in data for p in passwords.values()), f"a password in {path}"


def test_the_hub_spawns_a_seat_as_the_teacher_locked_it_in_the_class_reservation(
    workshop: dict[str, Any],
) -> None:
    shop = workshop["shop"]
    reservation = shop.runner().run(["scontrol", "show", "reservation", "workshop"], timeout=20).stdout
    assert "Accounts=workshop" in reservation and "State=ACTIVE" in reservation
    hub = shop.hub()
    # the REST API asks for 4 GPUs and an hour: the teacher locked 1 GPU; the reservation is set, not asked
    job_id = hub.start_server("student01", ngpus=4, runtime="1:00:00")
    try:
        job = shop.runner().run(["scontrol", "show", "job", "-o", job_id], timeout=20).stdout
        assert "UserId=student01(" in job and "Account=workshop" in job and "QOS=workshop" in job
        assert "Reservation=workshop" in job
        assert re.search(r"gres/gpu=1\b", job) and "gres/gpu=4" not in job
        assert "TimeLimit=01:00:00" in job  # a prefilled field is the student's to change
        # the lessons' own jobs, submitted from the student's server by slurmlab's runner, run in it too
        env = _server_environment("student01", job_id)
        jobs = _submit_from(shop, "student01", env)
        found = shop.runner().run(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i %v"], timeout=20).stdout
        shop.runner().run(["scancel", *jobs], timeout=20, check=False)
        assert sorted(found.split()) == sorted([*jobs, "workshop", "workshop"]), (found, env)
    finally:
        hub.stop_server("student01")


def _server_environment(name: str, job_id: str) -> dict[str, str]:
    """The environment of ``name``'s single-user server (its job's step), as the hub's spawner gave it."""
    uid = pwd.getpwnam(name).pw_uid
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if not entry.name.isdigit() or entry.stat().st_uid != uid:
                continue
            pairs = (entry / "environ").read_bytes().split(b"\0")
            env = dict(p.decode(errors="replace").split("=", 1) for p in pairs if b"=" in p)
            if env.get("SLURM_JOB_ID") == job_id and "JUPYTERHUB_API_TOKEN" in env:
                return env
    raise AssertionError(f"no process of {name}'s server (job {job_id}) found")


# what a lesson's cell does through slurmlab: a batch job and an allocation (--immediate: never wait for nodes
# the reservation holds, were the job not in it); prints their ids
_SUBMIT = """
import re
from slurmlab.slurm.runner import Runner
runner = Runner()
batch = runner.run(["sbatch", "--parsable", "--time=2", "--output=/dev/null", "--wrap=sleep 120"], timeout=30)
alloc = runner.run(["salloc", "--no-shell", "--time=2", "--immediate=30"], timeout=60)
print(batch.stdout.strip().split(";")[0], re.search(r"allocation (\\d+)", alloc.stderr).group(1))
"""


def _submit_from(shop: Any, name: str, env: dict[str, str]) -> list[str]:
    """Run :data:`_SUBMIT` as ``name`` with ``env`` (the server's: inside its job, as a kernel is); the ids."""
    python = shop.hub().settings["python"]
    runuser = shutil.which("runuser") or "runuser"
    res = subprocess.run(
        [runuser, "-u", name, "--", python, "-c", _SUBMIT],
        env=env,
        cwd=shop.home(name),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.split()


def test_a_second_class_with_the_same_names_is_refused_with_words(workshop: dict[str, Any]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            ["workshop", "up", "--seats", "2", "--profile", "seed", "--dir", "/tmp/slurmlab-workshop-nope"]
        )
    assert code == 2
    assert "these users exist on this machine already: student01, student02" in err.getvalue()
    assert "--prefix" in err.getvalue()
    assert not Path("/tmp/slurmlab-workshop-nope").exists()


def test_a_student_over_the_gpu_cap_waits_and_status_says_why(workshop: dict[str, Any]) -> None:
    shop = workshop["shop"]
    first = _as_seat(shop, "student02", ["sbatch", f"--gpus={CAP}", "--time=5", "--wrap=sleep 300"])
    second = _as_seat(shop, "student02", ["sbatch", "--gpus=1", "--time=5", "--wrap=sleep 300"])
    reason = _wait_reason(shop, second)
    # once (a CI run) the reason stayed "" for 40 s: the second job not listed, or running past the cap; what
    # Slurm then says of both jobs and of the cap is in the message, for whoever meets it next
    assert reason == "QOSMaxGRESPerUser", _slurm_says(shop, first, second)
    assert next(j for j in shop.jobs() if j.job_id == first).state == "RUNNING"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["workshop", "status", "--dir", str(workshop["folder"])]) == 0
    line = next(x for x in out.getvalue().splitlines() if f"job {second} " in x)
    assert line.startswith("  student02:") and "PENDING (QOSMaxGRESPerUser)" in line
    assert "the most GPUs (GRES) your QOS allows per user" in line


def test_reset_cancels_the_class_jobs_and_puts_back_only_unchanged_lessons(workshop: dict[str, Any]) -> None:
    shop, folder = workshop["shop"], workshop["folder"]
    job = _as_seat(shop, "student03", ["sbatch", "--time=5", "--wrap=sleep 300"])
    assert any(j.job_id == job for j in shop.jobs())
    settings = (folder / "teacher-settings.json").read_bytes()
    original = (folder / "lessons" / "00-quickstart.ipynb").read_bytes()
    lessons1 = shop.home("student01") / "lessons"
    (lessons1 / "00-quickstart.ipynb").unlink()  # lost: put back
    lessons3 = shop.home("student03") / "lessons"
    mine = (lessons3 / "00-quickstart.ipynb").read_bytes() + b"\n"  # the student's work: left alone
    (lessons3 / "00-quickstart.ipynb").write_bytes(mine)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["workshop", "reset", "--dir", str(folder)]) == 0

    assert shop.jobs() == []
    assert job in out.getvalue()
    assert (lessons1 / "00-quickstart.ipynb").read_bytes() == original
    assert (lessons1 / "00-quickstart.ipynb").stat().st_uid == pwd.getpwnam("student01").pw_uid
    assert (lessons3 / "00-quickstart.ipynb").read_bytes() == mine
    assert "student03 changed 00-quickstart.ipynb: left as they are" in out.getvalue()
    assert (folder / "teacher-settings.json").read_bytes() == settings


def test_down_leaves_no_user_process_port_or_file(workshop: dict[str, Any]) -> None:
    shop, folder, before = workshop["shop"], workshop["folder"], workshop["before"]
    uids = {pwd.getpwnam(n).pw_uid for n in SEATS}
    pids = _class_pids(folder, uids)
    listening = _listening()
    ports = {port for port, owners in listening.items() if owners & pids}
    assert ports and not ports & set(before["ports"]), "the class listens on ports of its own"
    assert shop.hub().settings["port"] in ports

    # what a student's program leaves in /tmp is the class's too
    left = Path(tempfile.gettempdir()) / f"slurmlab-workshop-left-{os.getpid()}"
    shop.runner().run([shutil.which("runuser") or "runuser", "-u", "student02", "--", "mkdir", str(left)])
    assert left.stat().st_uid == pwd.getpwnam("student02").pw_uid

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["workshop", "down", "--dir", str(folder)]) == 0
    said = out.getvalue()
    assert not left.exists() and str(left) in said
    assert "3 Unix accounts: student01, student02, student03" in said and "JupyterHub" in said

    assert not [line for line in Path("/etc/passwd").read_text().splitlines() if line.startswith(PREFIX)]
    for name in ("passwd", "group"):
        now = set(Path(f"/etc/{name}").read_text().splitlines())
        was = set(before[name].splitlines())
        assert was <= now, f"down removed lines of /etc/{name} that were there before up: {was - now}"
        assert not [line for line in now - was if line.startswith(PREFIX)], f"a seat left in /etc/{name}"
    from slurmlab.sandbox import processes

    assert not [p for p in pids if processes.alive(p)], "a process of the class outlived down"
    assert not _class_pids(folder, uids)
    assert not ports & set(_listening()), "a port of the class still listens"
    assert not folder.exists()
    for where in ("/tmp", "/var/tmp", "/dev/shm", "/var/mail", "/home"):
        found = subprocess.run(
            ["find", where, "-xdev", "-maxdepth", "3", "(", *_uid_tests(uids), ")", "-print"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert not found.stdout.strip(), f"files of the class left in {where}: {found.stdout[:500]}"

    with contextlib.redirect_stdout(out := io.StringIO()):
        assert main(["workshop", "down", "--dir", str(folder)]) == 0  # again: nothing left, nothing to do
    assert "nothing to remove" in out.getvalue()


def _uid_tests(uids: set[int]) -> list[str]:
    out: list[str] = []
    for uid in sorted(uids):
        out += [*(["-o"] if out else []), "-uid", str(uid)]
    return out
