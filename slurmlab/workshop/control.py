"""Bring a class up, reset it, and take it down again: seats, a sandbox with accounting, the hub, the lessons.

    shop, secrets = Workshop.up("/srv/slurmlab-workshop", seats=3, profile="seed", lessons=lessons)
    shop.reset()          # the class's jobs cancelled, unchanged lessons put back, changed ones reported
    shop.down()           # users, homes, database, daemons, hub, ports: everything up made, nothing else

Everything of a workshop lives in its folder (the homes too), recorded in ``workshop.json`` as it is made, so
that ``down`` after a failed or half-done ``up`` removes what was made so far, and nothing that was not.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets as secret_words
import shutil
import stat
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmlab.core.last_cell import LAST_CELL_ENV, LAST_CELL_FILE
from slurmlab.errors import SlurmlabError
from slurmlab.hub.passwords import hash_secret
from slurmlab.hub.settings import check_form_settings
from slurmlab.sandbox import Sandbox, load_profile, processes
from slurmlab.slurm.runner import Runner
from slurmlab.workshop import lessons, users
from slurmlab.workshop.plan import ACCOUNT, RESERVATION, WorkshopPlan, sacctmgr_commands
from slurmlab.workshop.seats import check_prefix, seat_names, seat_secrets, taken

__all__ = ["DEFAULT_FOLDER", "TEACHER", "VIEW_PATH", "ResetReport", "SeatJob", "Workshop"]

DEFAULT_FOLDER = Path("/srv/slurmlab-workshop")
STATE_FILE = "workshop.json"
SECRETS_FILE = "seats.secret"  # the seats' password hashes, 0600, read by the hub at each login
SETTINGS_FILE = "teacher-settings.json"  # the spawn form's prefilled or locked fields: reset never writes it
HOMES = "home"
# the teacher's name in the hub (no Unix account, never a server: an admin who sees the room) and their page
TEACHER = "teacher"
VIEW_PATH = "/services/workshop/"
VIEW_EVERY = 15  # seconds: the view asks Slurm at most this often (one squeue of the class), its page reloads
# what the teacher may choose (``workshop up --view-every``); the view itself asks no more often than the shortest
VIEW_EVERY_MIN, VIEW_EVERY_MAX = 5, 3600
# what the view's own token may read of the hub: who the users are, their servers, when they were last active
_VIEW_SCOPES = ["list:users", "read:users", "read:servers", "read:users:activity"]
# the machine's shared temporary folders, where a student's program may leave files: down removes theirs
TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
# what sacctmgr says when what it was asked to add or change is there already (a second run of a step)
_ALREADY = (
    "nothing new added",
    "already exist",
    "nothing modified",
    "nothing added",
    "didn't affect anything",
)

Say = Callable[[str], None]


def _quiet(line: str) -> None:
    pass


@dataclass(frozen=True)
class SeatJob:
    """One active job of the class, as squeue said it."""

    job_id: str
    user: str
    state: str
    reason: str


@dataclass
class ResetReport:
    """What ``reset`` did."""

    cancelled: list[str] = field(default_factory=list)  # job ids
    restored: dict[str, list[str]] = field(default_factory=dict)  # seat -> lessons put back
    changed: dict[str, list[str]] = field(default_factory=dict)  # seat -> lessons left (the student's work)


def _require_root() -> None:
    if os.geteuid() != 0:
        raise SlurmlabError(
            "a workshop creates Unix accounts and runs a hub that starts jobs as each student: it needs root",
            hint="run it with sudo: sudo slurmlab workshop up …",
        )


def _open_to_all(folder: Path) -> None:
    """Every folder above ``folder`` must let the students pass (their homes and the sandbox are inside)."""
    for part in reversed(folder.parents):
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise SlurmlabError(
                f"the students could not reach the workshop folder {folder}: {part} is closed to them "
                f"(mode {stat.filemode(mode)})",
                hint=f"choose a folder under an open one with --dir (the default is {DEFAULT_FOLDER})",
            )


def _write_private(path: Path, data: Any) -> None:
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    os.replace(part, path)


@dataclass
class Workshop:
    """A class recorded in ``folder`` (by :meth:`up`; found again by :meth:`find`)."""

    folder: Path
    state: dict[str, Any]

    # ---- what it is -------------------------------------------------------------------------------------
    @property
    def seats(self) -> tuple[str, ...]:
        return tuple(s["name"] for s in self.state["seats"])

    def home(self, name: str) -> Path:
        return self.folder / HOMES / name

    def _save(self) -> None:
        _write_private(self.folder / STATE_FILE, self.state)

    def sandbox(self) -> Sandbox | None:
        where = self.folder / "sandbox"
        if not (where / "state.json").exists():
            return None
        return Sandbox.find(where)

    def runner(self) -> Runner:
        sb = self.sandbox()
        if sb is None:
            raise SlurmlabError(f"the workshop in {self.folder} has no sandbox running", hint="workshop up")
        return sb.runner()

    @classmethod
    def find(cls, folder: str | os.PathLike[str] | None = None) -> Workshop:
        where = Path(folder or DEFAULT_FOLDER).absolute()
        try:
            state = json.loads((where / STATE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SlurmlabError(
                f"no workshop in {where}", hint="start one: sudo slurmlab workshop up"
            ) from None
        except (OSError, ValueError) as exc:
            raise SlurmlabError(
                f"the workshop's record {where / STATE_FILE} is unreadable ({exc})",
                hint="it is written by workshop up only; remove the folder's processes and users by hand",
            ) from None
        return cls(where, state)

    # ---- up ---------------------------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        folder: str | os.PathLike[str] | None,
        *,
        seats: int,
        profile: str,
        lessons_given: Mapping[str, bytes],
        prefix: str = "student",
        gpu_cap: int = 1,
        reservation: bool = False,
        password_mode: str = "shared",
        form: Mapping[str, Any] | None = None,
        nodes: int | None = None,
        view_every: float = VIEW_EVERY,
        say: Say = _quiet,
    ) -> tuple[Workshop, dict[str, str]]:
        """Bring the class up; returns it and each seat's password, then the teacher's under :data:`TEACHER`
        (shown once, kept nowhere). ``view_every``: how often (s) the teacher's page asks Slurm and reloads."""
        where = Path(folder or DEFAULT_FOLDER).absolute()
        try:
            if not VIEW_EVERY_MIN <= view_every <= VIEW_EVERY_MAX:
                raise ValueError(
                    f"the teacher's view cannot ask Slurm every {view_every:g} s: give {VIEW_EVERY_MIN} to "
                    f"{VIEW_EVERY_MAX} "
                    f"seconds (each time is one squeue of the class; the default is {VIEW_EVERY})"
                )
            plan = WorkshopPlan(
                seat_names(check_prefix(prefix), seats), profile, gpu_cap, reservation, password_mode
            )
            secrets = seat_secrets(plan.seats, password_mode)
            secrets[TEACHER] = secret_words.token_urlsafe(12)  # never the class's: the view is the teacher's
            prof = load_profile(profile)
            partitions = [p.name for p in sorted(prof.partitions, key=lambda p: not p.default)]
            settings = check_form_settings(dict(form or {}), partitions)
        except ValueError as exc:
            raise SlurmlabError(str(exc), hint="see slurmlab workshop up --help") from None
        _require_root()
        if (where / STATE_FILE).exists():
            raise SlurmlabError(
                f"a workshop is already recorded in {where}",
                hint=f"take it down first: sudo slurmlab workshop down --dir {where}",
            )
        if where.exists() and any(where.iterdir()):
            raise SlurmlabError(
                f"{where} exists and is not empty: down removes the whole workshop folder, so it must be its own",
                hint="choose an empty or new folder with --dir",
            )
        in_use = taken(plan.seats, users.exists)
        if in_use:
            raise SlurmlabError(
                f"these users exist on this machine already: {', '.join(in_use)}; a workshop makes its own and "
                "removes them afterwards, so it never takes over an existing one",
                hint="choose another prefix (--prefix) that no user or group starts with",
            )
        _open_to_all(where)
        if reservation:
            settings["reservation"] = {"value": RESERVATION, "locked": True}
        where.mkdir(mode=0o755, parents=True, exist_ok=True)
        where.chmod(0o755)
        shop = cls(
            where,
            {
                "folder": str(where),
                "prefix": prefix,
                "profile": profile,
                "gpu_cap": gpu_cap,
                "reservation": reservation,
                "password_mode": password_mode,
                "view_every": view_every,
                "seats": [],
                "lessons": {},
                "given": {},
                "started": time.time(),
            },
        )
        shop._save()
        _write_private(where / SETTINGS_FILE, settings)
        try:
            shop._build(plan, secrets, lessons_given, nodes, say)
        except BaseException:
            say("up failed: removing what it made")
            with contextlib.suppress(Exception):
                shop.down()
            raise
        return shop, secrets

    def _build(
        self,
        plan: WorkshopPlan,
        secrets: Mapping[str, str],
        lessons_given: Mapping[str, bytes],
        nodes: int | None,
        say: Say,
    ) -> None:
        steps = iter(plan.steps())
        say(next(steps))
        (self.folder / HOMES).mkdir(mode=0o755, exist_ok=True)
        for name in plan.seats:
            home = self.home(name)
            uid = users.add_user(name, home)
            self.state["seats"].append({"name": name, "uid": uid})
            self._save()
            users.make_home(name, home)
        say(next(steps))
        sb = Sandbox.up(
            profile=plan.profile,
            nodes=nodes,
            directory=self.folder / "sandbox",
            accounting=True,
            admit=plan.seats,
        )
        say(next(steps))
        say(next(steps))
        self._sacctmgr(sb, sacctmgr_commands(str(sb.state["cluster"]), plan.seats, plan.gpu_cap))
        if plan.reservation:
            say(next(steps))
            from slurmlab.slurm.reservations import create_reservation

            create_reservation(RESERVATION, sb.nodes, [ACCOUNT], sb.runner())
        say(next(steps))
        self.state["lessons"] = lessons.write_originals(self.folder, lessons_given)
        for name in plan.seats:
            self.state["given"][name] = lessons.give(self.home(name), name, self.folder / lessons.LESSONS)
        self._save()
        say(next(steps))
        hashes = {name: hash_secret(secret) for name, secret in secrets.items()}
        _write_private(self.folder / SECRETS_FILE, hashes)
        from slurmlab.hub.control import Hub

        form = json.loads((self.folder / SETTINGS_FILE).read_text(encoding="utf-8"))
        Hub.up(
            sb,
            self.folder / "hub",
            users=list(plan.seats),
            seat_hashes=self.folder / SECRETS_FILE,
            form=form,
            alike_users=True,
            admins=[TEACHER],
            services=[self._view_service()],
            # each seat's kernels say how each cell ended, for the teacher's view (not only at autosave)
            environment={LAST_CELL_ENV: f"{lessons.LESSONS}/{LAST_CELL_FILE}"},
        )

    def _view_service(self) -> dict[str, Any]:
        """The teacher's view as the hub starts it (:mod:`slurmlab.workshop.view`), on a free loopback port."""
        from slurmlab.sandbox.ports import free_ports
        from slurmlab.workshop.view import SERVICE, TEACHERS_ENV

        (port,) = free_ports(1)
        return {
            "name": SERVICE,
            "port": port,
            "command": [sys.executable, "-m", "slurmlab.workshop.view", "--dir", str(self.folder)]
            + ["--every", f"{float(self.state.get('view_every', VIEW_EVERY)):g}"],
            "environment": {TEACHERS_ENV: TEACHER},
            "scopes": _VIEW_SCOPES,
        }

    @staticmethod
    def _sacctmgr(sb: Sandbox, commands: list[list[str]]) -> None:
        runner = sb.runner()
        for args in commands:
            res = runner.run(["sacctmgr", "-i", *args], timeout=20, check=False)
            text = (res.stdout + res.stderr).strip()
            if res.returncode != 0 and not any(a in text.lower() for a in _ALREADY):
                raise SlurmlabError(
                    f"sacctmgr {' '.join(args)} failed (exit code {res.returncode}): {text}",
                    hint=f"read {sb.directory / 'log' / 'slurmdbd.log'}",
                )

    # ---- the class's jobs -------------------------------------------------------------------------------
    def queue_text(self) -> str:
        """What one squeue of the class prints (:data:`~.room.ROOM_QUEUE_ARGV`: every active job, the fields
        Slurm writes alone): the teacher's view asks it once per refresh, :meth:`jobs` once."""
        from slurmlab.workshop.room import ROOM_QUEUE_ARGV

        return self.runner().run(list(ROOM_QUEUE_ARGV), timeout=20).stdout

    def jobs(self) -> list[SeatJob]:
        """The class's active jobs: every job of a seat (the seats are in the class account only), from one
        squeue (:meth:`queue_text`; the detailed listing asked the controller several times on 22.05)."""
        from slurmlab.workshop.room import parse_room_queue

        seats = set(self.seats)
        found = parse_room_queue(self.queue_text())
        return [SeatJob(j.job_id, j.user, j.state, j.reason) for j in found if j.user in seats]

    def _cancel_jobs(self, timeout: float = 30.0) -> list[str]:
        from slurmlab.errors import JobNotFoundError
        from slurmlab.slurm.job_queries import cancel_job

        found = self.jobs()
        runner = self.runner()
        for job in found:
            # the operator (root, the sandbox's SlurmUser) ends the seats' jobs; one that ended meanwhile is fine
            with contextlib.suppress(JobNotFoundError):
                cancel_job(job.job_id, runner, only_mine=False)
        deadline = time.monotonic() + timeout
        while found and time.monotonic() < deadline and self.jobs():
            time.sleep(0.5)
        return [j.job_id for j in found]

    # ---- reset ------------------------------------------------------------------------------------------
    def reset(self) -> ResetReport:
        """Cancel the class's jobs (the students' servers stopped through the hub first), put back each lesson a
        student has not changed, report the ones they did. The teacher's settings are not touched."""
        _require_root()
        report = ResetReport()
        hub = self.hub()
        if hub is not None and hub.alive():
            for name in self.seats:
                with contextlib.suppress(SlurmlabError, OSError):
                    if hub.user(name).get("servers"):
                        hub.stop_server(name, timeout=30)
        report.cancelled = self._cancel_jobs()
        originals = self.folder / lessons.LESSONS
        for name in self.seats:
            done, now = lessons.reset_seat(
                self.home(name), name, originals, self.state["given"].get(name, {})
            )
            self.state["given"][name] = now
            report.restored[name] = done.restored
            if done.changed:
                report.changed[name] = done.changed
        self._save()
        return report

    def hub(self) -> Any:
        """The hub of the workshop (a :class:`~slurmlab.hub.Hub`), or None when none is recorded."""
        from slurmlab.hub.control import STATE_FILE as HUB_STATE
        from slurmlab.hub.control import Hub

        where = self.folder / "hub"
        return Hub.find(where) if (where / HUB_STATE).exists() else None

    # ---- down -------------------------------------------------------------------------------------------
    def down(self) -> list[str]:
        """Remove what up made: the hub, the sandbox (daemons, database), the seats' processes, their files in the
        machine's temporary folders and their accounts, then the workshop folder (homes inside). Returns one line
        per thing removed. A step that fails does not stop the others; the folder (and its record) is then kept,
        so that ``down`` can be run again, and the error names what is left."""
        _require_root()
        removed: list[str] = []
        failed: list[str] = []
        for step in (
            self._down_hub,
            self._down_sandbox,
            self._down_processes,
            self._down_temp,
            self._down_users,
        ):
            try:
                removed += step()
            except (SlurmlabError, OSError) as exc:
                failed.append(str(exc))
        if failed:
            raise SlurmlabError(
                "workshop down could not remove everything: " + "; ".join(failed),
                hint=f"fix that, then run sudo slurmlab workshop down --dir {self.folder} again",
            )
        if self.folder.exists():
            shutil.rmtree(self.folder)
            removed.append(f"the workshop folder {self.folder} (the homes, lessons, records)")
        return removed

    def _down_hub(self) -> list[str]:
        hub = self.hub()
        if hub is None:
            return []
        forced = hub.down()
        # the hub stops the teacher's view with itself; a hub stopped by force leaves it: stop it then
        view = [
            int(e.name)
            for e in Path("/proc").iterdir()
            if e.name.isdigit() and _is_view(int(e.name), self.folder)
        ]
        if view:
            processes.stop(view)
            forced.append(f"the teacher's view (pid {', '.join(map(str, view))})")
        return [f"JupyterHub and its proxy ({hub.url})" + (f"; by force: {forced}" if forced else "")]

    def _down_sandbox(self) -> list[str]:
        sb = self.sandbox()
        if sb is None:
            return []
        stopped = sb.down()
        return [f"the sandbox's daemons and its database ({len(stopped)} processes)"]

    def _down_processes(self) -> list[str]:
        left = self._stop_seat_processes()
        return [f"{left} leftover processes of the seats"] if left else []

    def _down_temp(self) -> list[str]:
        """What the seats left in the machine's shared temporary folders (their own entries only)."""
        uids = {int(s["uid"]) for s in self.state.get("seats", []) if _still_theirs(s)}
        gone = []
        for base in TEMP_FOLDERS:
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(base):
                    if entry.stat(follow_symlinks=False).st_uid not in uids:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)  # fd-based on Linux: a link inside is removed, not followed
                    else:
                        os.unlink(entry.path)
                    gone.append(entry.path)
        return (
            [f"{len(gone)} files of the seats in {', '.join(TEMP_FOLDERS)}: {', '.join(gone)}"]
            if gone
            else []
        )

    def _down_users(self) -> list[str]:
        gone = [s["name"] for s in self.state.get("seats", []) if users.remove_user(s["name"], int(s["uid"]))]
        return [f"{len(gone)} Unix accounts: {', '.join(gone)}"] if gone else []

    def _stop_seat_processes(self) -> int:
        uids = {int(s["uid"]) for s in self.state.get("seats", []) if _still_theirs(s)}
        mine = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if entry.stat().st_uid in uids:
                        mine.append(int(entry.name))
        if not mine:
            return 0
        left = processes.stop(mine, grace=5.0)
        if left:
            raise SlurmlabError(
                f"processes {left} of the seats did not stop", hint=f"kill -9 {' '.join(map(str, left))}"
            )
        return len(mine)

    # ---- status -----------------------------------------------------------------------------------------
    def describe(self) -> list[str]:
        """Lines for ``workshop status``: the hub, the seats, each job of the class and why it waits."""
        from slurmlab.core.slurm.reasons import explain_reason

        out = [f"workshop in {self.folder}: {len(self.seats)} seats ({', '.join(self.seats)})"]
        hub = self.hub()
        out.append(f"hub: {hub.url} ({'running' if hub.alive() else 'not running'})" if hub else "hub: none")
        if hub is not None:
            out.append(f"the teacher's view: {hub.url}{VIEW_PATH} (log in as {TEACHER})")
        cap = self.state.get("gpu_cap")
        out.append(f"class account {ACCOUNT}, at most {cap} GPU(s) per student at once")
        sb = self.sandbox()
        if sb is None:
            out.append("sandbox: not running")
            return out
        for job in self.jobs():
            line = f"  {job.user}: job {job.job_id} {job.state}"
            explained = explain_reason(job.reason) if job.state == "PENDING" else None
            if explained is not None:
                line += f" ({job.reason}): {explained.words}" + (
                    f"; {explained.hint}" if explained.hint else ""
                )
            out.append(line)
        return out


def _is_view(pid: int, folder: Path) -> bool:
    argv = processes.cmdline(pid)
    return "slurmlab.workshop.view" in argv and str(folder) in argv


def _still_theirs(seat: Mapping[str, Any]) -> bool:
    try:
        return pwd.getpwnam(str(seat["name"])).pw_uid == int(seat["uid"])
    except KeyError:
        return False
