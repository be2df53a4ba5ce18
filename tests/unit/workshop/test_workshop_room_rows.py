"""The teacher's view (issue 31 point 2) without a hub or a Slurm: the class's one squeue read, who is stuck and
why, the GPUs held of the cap, the page, the at-most-one-squeue-per-refresh budget, and the hub's settings that
make the teacher an admin with no server and start the view as a service on loopback."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from slurmlab.errors import ParseError, SlurmlabError
from slurmlab.hub.settings import configure
from slurmlab.workshop.room import (
    ROOM_QUEUE_ARGV,
    build_room,
    gpus_held,
    own_making,
    parse_room_queue,
    render_room,
)
from slurmlab.workshop.view import RoomCache

# configure() sets SLURM_CONF: each test puts back what the worker had
pytestmark = pytest.mark.usefixtures("slurm_conf_kept")


DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 12, 5, 1, 0, tzinfo=timezone.utc)


def _recorded() -> str:
    return (DATA / "room_squeue_2205.txt").read_text(encoding="utf-8")


def _hub_users() -> list[dict[str, Any]]:
    users: list[dict[str, Any]] = json.loads((DATA / "room_hub_users.json").read_text(encoding="utf-8"))
    return users


def test_the_class_is_read_from_one_squeue_with_what_each_running_job_holds() -> None:
    assert ROOM_QUEUE_ARGV[0] == "squeue" and "-h" in ROOM_QUEUE_ARGV
    jobs = parse_room_queue(_recorded())
    assert jobs, "the recorded output has the room's jobs"
    assert all(j.user.startswith("student") for j in jobs)
    running = [j for j in jobs if j.state == "RUNNING"]
    pending = [j for j in jobs if j.state == "PENDING"]
    assert any(j.gpus == 1 for j in running)  # a %salloc --gpus=1
    assert all(j.gpus == 0 for j in pending)
    assert [j.reason for j in pending] == ["QOSMaxGRESPerUser"]
    assert all(j.reason == "" for j in running)  # squeue's "None" is no reason


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("cpu=1,mem=1G,node=1,billing=1,gres/gpu=2", 2),
        ("cpu=2,mem=2G,node=1,billing=2,gres/gpu=2,gres/gpu:h100=2", 2),  # typed and untyped: not twice
        ("cpu=2,node=1,gres/gpu:a100=1,gres/gpu:h100=2", 3),
        ("cpu=1,mem=1G,node=1,billing=1", 0),
        ("", 0),
        ("cpu=1,gres/gpumem=4096,gres/shard=2", 0),
    ],
)
def test_gpus_held_are_read_from_tres_alloc(tres: str, gpus: int) -> None:
    assert gpus_held(tres) == gpus


def test_a_line_of_another_shape_is_refused_with_the_line() -> None:
    with pytest.raises(ParseError, match="squeue"):
        parse_room_queue("12 student01 RUNNING\n")


@pytest.mark.parametrize(
    ("reason", "theirs"),
    [
        ("QOSMaxGRESPerUser", True),  # over the seat's GPU cap: their own other jobs hold it
        ("QOSMaxGRESPerJob", True),  # asked for more GPUs than one job may have
        ("AssocMaxJobsLimit", True),
        ("BadConstraints", True),  # a request that can never start
        ("PartitionConfig", True),
        ("AssocGrpGRES", False),  # the class's share: not the student's doing
        ("QOSMaxGRESPerAccount", False),
        ("Resources", False),
        ("Priority", False),
        ("", False),
    ],
)
def test_stuck_means_waiting_for_a_reason_of_their_own_making(reason: str, theirs: bool) -> None:
    assert own_making(reason) is theirs


def test_each_seat_shows_its_server_jobs_gpus_and_whether_it_is_stuck() -> None:
    room = build_room(("student01", "student02", "student03"), _hub_users(), parse_room_queue(_recorded()))
    assert [s.name for s in room] == ["student01", "student02", "student03"]
    by = {s.name: s for s in room}
    assert all(s.server == "running" for s in room)
    assert all(s.last_activity is not None for s in room)
    stuck = [s.name for s in room if s.stuck]
    assert len(stuck) == 1
    (over,) = stuck
    assert by[over].gpus == 1
    assert "your jobs already use the most GPUs" in by[over].stuck[0]
    assert "QOSMaxGRESPerUser" in by[over].stuck[0]


def test_a_seat_never_seen_and_a_job_of_another_user_are_told_apart() -> None:
    jobs = parse_room_queue(
        _recorded().replace("student02", "someoneelse")  # a job of a user who is not a seat
    )
    users = [u for u in _hub_users() if u["name"] != "student02"]
    room = build_room(("student01", "student02"), users, jobs)
    second = room[1]
    assert second.server == "none" and second.last_activity is None and second.jobs == []
    page = render_room(room, 1, refresh=15, now=NOW, asked=NOW)
    assert "never logged in" in page and "someoneelse" not in page


def test_the_page_reloads_itself_and_escapes_what_others_wrote() -> None:
    jobs = parse_room_queue("7|student01|PENDING|<script>x</script>||\n")
    room = build_room(("student01",), [], jobs)
    page = render_room(room, 2, refresh=20, now=NOW, asked=None, trouble="Slurm <down>")
    assert '<meta http-equiv="refresh" content="20">' in page
    assert "<script>x" not in page and "&lt;script&gt;" in page
    assert "Slurm &lt;down&gt;" in page
    assert "0 of 2" in page  # GPUs held of the cap
    assert "newest notebook" in page  # says where a seat's last cell is read from


def test_slurm_is_asked_at_most_once_per_refresh_however_many_look() -> None:
    clock = [100.0]
    calls = {"squeue": 0, "hub": 0}

    def ask_queue() -> str:
        calls["squeue"] += 1
        return _recorded()

    def ask_users() -> list[dict[str, Any]]:
        calls["hub"] += 1
        return _hub_users()

    cache = RoomCache(("student01", "student02", "student03"), 15, ask_queue, ask_users, lambda: clock[0])
    for _ in range(30):  # thirty pages open at once: one squeue
        room, asked, trouble = cache.snapshot()
    assert calls == {"squeue": 1, "hub": 1}
    assert len(room) == 3 and asked is not None and trouble == ""
    clock[0] += 14.9
    cache.snapshot()
    assert calls["squeue"] == 1
    clock[0] += 0.2
    cache.snapshot()
    assert calls["squeue"] == 2


def test_a_controller_that_does_not_answer_keeps_the_last_room_and_says_so() -> None:
    clock = [0.0]
    answers: list[Any] = [_recorded(), SlurmlabError("slurmctld does not answer")]

    def ask_queue() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return str(answer)

    cache = RoomCache(("student01", "student02", "student03"), 15, ask_queue, _hub_users, lambda: clock[0])
    first, _, _ = cache.snapshot()
    clock[0] += 16
    second, _, trouble = cache.snapshot()
    assert second is first
    assert "slurmctld does not answer" in trouble


def _settings(tmp_path: Path, **extra: Any) -> Path:
    settings = {
        "folder": str(tmp_path),
        "slurm_conf": str(tmp_path / "slurm.conf"),
        "port": 8123,
        "hub_port": 8124,
        "proxy_api_port": 8125,
        "users": ["student01", "student02"],
        "password": "pw",
        "service_token": "t" * 64,
        "proxy_token": "p" * 64,
        "proxy": "/x/configurable-http-proxy",
        "runuser": "/usr/sbin/runuser",
        "singleuser": "/v/bin/jupyterhub-singleuser",
        "python": "/usr/bin/python3.11",
        "pythonpath": "/v/lib",
        "jupyter_prefix": "/v",
        "nodes": ["node1"],
        "partitions": ["gpu"],
        **extra,
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return path


class _Spawner:
    def __init__(self, name: str) -> None:
        self.user = type("User", (), {"name": name})()


def test_the_teacher_is_an_admin_who_never_gets_a_server_and_the_view_is_a_loopback_service(
    tmp_path: Path,
) -> None:
    view = {
        "name": "workshop",
        "port": 8130,
        "command": ["/v/bin/python", "-m", "slurmlab.workshop.view", "--dir", "/srv/w"],
        "environment": {"SLURMLAB_WORKSHOP_TEACHERS": "teacher"},
        "scopes": ["list:users", "read:users"],
    }
    c = Config()
    configure(c, str(_settings(tmp_path, admins=["teacher"], services=[view])))
    assert c.Authenticator.allowed_users == {"student01", "student02", "teacher"}
    assert c.Authenticator.admin_users == {"teacher"}
    hook = c.Spawner.pre_spawn_hook
    hook(_Spawner("student01"))  # a seat spawns
    with pytest.raises(ValueError, match="teacher has no server"):
        hook(_Spawner("teacher"))
    (service,) = [s for s in c.JupyterHub.services if s["name"] == "workshop"]
    assert service["url"] == "http://127.0.0.1:8130"
    assert service["command"] == view["command"]
    assert service["environment"] == view["environment"]
    (role,) = [r for r in c.JupyterHub.load_roles if r.get("services") == ["workshop"]]
    assert role["scopes"] == ["list:users", "read:users"]


def test_a_hub_without_a_workshop_has_no_admin_no_spawn_hook_and_no_view(tmp_path: Path) -> None:
    c = Config()
    configure(c, str(_settings(tmp_path)))
    assert c.Authenticator.admin_users == set()
    assert "pre_spawn_hook" not in c.Spawner
    assert [s["name"] for s in c.JupyterHub.services] == ["slurmlab-hub"]


def test_the_recorded_activity_is_recent_enough_to_read() -> None:
    # the recorded /hub/api/users answer: JupyterHub's ISO times with a Z
    room = build_room(("student01",), _hub_users(), [])
    stamp = room[0].last_activity
    assert stamp is not None and stamp.tzinfo is not None
    page = render_room(room, 1, refresh=15, now=stamp + timedelta(minutes=3), asked=None)
    assert "active 3 min ago" in page


def test_a_class_reservation_is_in_every_students_server_environment(tmp_path: Path) -> None:
    # with `workshop up --reservation` the teacher's form settings hold it; the lessons' own salloc, sbatch and
    # srun (and the student's terminal) read it from these variables, so their jobs run in it too
    form = {"reservation": {"value": "workshop", "locked": True}}
    c = Config()
    configure(c, str(_settings(tmp_path, form=form)))
    env = c.Spawner.environment
    assert {
        n: env.get(n) for n in ("SALLOC_RESERVATION", "SBATCH_RESERVATION", "SLURM_RESERVATION")
    } == dict.fromkeys(("SALLOC_RESERVATION", "SBATCH_RESERVATION", "SLURM_RESERVATION"), "workshop")
    plain = Config()
    configure(plain, str(_settings(tmp_path)))
    assert not any(n.endswith("_RESERVATION") for n in plain.Spawner.environment)
