"""One poll per host (issue 27): the service's files, and the checks a server makes before it trusts them.

The service polls a FakeRunner replaying the recorded 22.05 cluster (every job root's) and writes real files into
a temporary directory; the tests run as root (the project's test machine), so they can hand a file to another
uid, open a directory to others, put a symlink in place, as an attacker on a login node would.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from fake_slurm import OWNER_UID, cluster, rec

from slurmlab.server.data import ClusterSource
from slurmlab.server.shared_poll import (
    PUBLIC,
    SharedPollReader,
    SharedPollService,
    parse_private_data,
    user_file,
)
from slurmlab.server.worker import PollWorker
from slurmlab.testing import FakeRunner

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hands files to other uids: needs root")

NOT_USED = "not using the shared poll"
CONFIG = "s12b_scontrol_show_config.txt"  # recorded on the 22.05 sandbox: PrivateData = none


def _service(fake: FakeRunner, directory: Path, config: str | None = None) -> SharedPollService:
    cluster(fake)
    if config is None:
        fake.on(["scontrol", "show", "config"], reply=rec(CONFIG))
    else:
        fake.on(["scontrol", "show", "config"], stdout=config)
    service = SharedPollService(directory, runner=fake, interval=30)
    service.prepare()
    service.once()
    return service


@pytest.fixture
def shared(tmp_path: Path, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    directory = tmp_path / "poll"
    _service(fake_runner, directory)
    return directory


def _reader(
    directory: Path, fake: FakeRunner, uid: int = OWNER_UID, user: str = "root", **kw: object
) -> SharedPollReader:
    """A viewer's reader, for the cluster the service polled (its runner's slurm.conf)."""
    return SharedPollReader(directory, os.path.realpath(str(fake.configuration())), uid, user, **kw)  # type: ignore[arg-type]


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if NOT_USED in r.getMessage()]


def _read_thrice(reader: SharedPollReader) -> list[object]:
    return [reader.read() for _ in range(3)]


def test_the_service_writes_a_public_file_and_one_private_file_per_user(shared: Path) -> None:
    public = shared / PUBLIC
    own = shared / user_file(OWNER_UID)
    assert public.stat().st_mode & 0o777 == 0o644 and public.stat().st_uid == 0
    assert own.stat().st_mode & 0o777 == 0o600 and own.stat().st_uid == OWNER_UID
    assert shared.stat().st_mode & 0o777 == 0o755
    data = json.loads(public.read_text())
    assert data["private_data"] == [] and data["jobs"] and data["nodes"]
    assert not any(j["mine"] for j in data["jobs"])  # nobody's: each reader marks its own


async def test_a_trusted_fresh_poll_answers_and_no_command_runs(
    shared: Path, fake_runner: FakeRunner
) -> None:
    source = ClusterSource(
        fake_runner, user="root", worker=PollWorker("thread"), shared=_reader(shared, fake_runner)
    )
    before = len(fake_runner.history)
    outcome = await source.poll(None, whole=True)
    assert fake_runner.history[before:] == []  # not one Slurm command of the server's own
    assert outcome.error_kind is None and source.shared_reads == 1
    assert {"nodes", "queue:all", "queue:mine"} <= set(outcome.answers)
    everyone = json.loads(outcome.answers["queue:all"].body)["jobs"]
    mine = json.loads(outcome.answers["queue:mine"].body)["jobs"]
    assert everyone and all(j["mine"] for j in everyone)  # every recorded job is root's
    assert [j["job_id"] for j in mine] == [j["job_id"] for j in everyone]


def test_another_viewer_sees_every_job_and_owns_none(shared: Path, fake_runner: FakeRunner) -> None:
    outcome = _reader(shared, fake_runner, uid=4321, user="someone").read()
    assert outcome is not None
    assert json.loads(outcome.answers["queue:mine"].body)["jobs"] == []
    assert not any(j["mine"] for j in json.loads(outcome.answers["queue:all"].body)["jobs"])


def test_a_directory_others_may_write_is_refused_once_in_the_log(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    shared.chmod(0o777)
    caplog.set_level(logging.INFO, "slurmlab.server")
    assert _read_thrice(_reader(shared, fake_runner)) == [None, None, None]
    said = _refusals(caplog)
    assert len(said) == 1 and "writable by its group or by others" in said[0], said


def test_a_file_owned_by_another_user_is_refused(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    os.chown(shared / PUBLIC, 12345, -1)
    caplog.set_level(logging.INFO, "slurmlab.server")
    assert _read_thrice(_reader(shared, fake_runner)) == [None, None, None]
    said = _refusals(caplog)
    assert len(said) == 1 and "owned by uid 12345" in said[0], said


def test_an_own_file_another_user_wrote_is_refused(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    """The viewer's file may be the writer's or the viewer's own, never a third user's."""
    os.chown(shared / user_file(OWNER_UID), 12345, -1)
    caplog.set_level(logging.INFO, "slurmlab.server")
    assert _read_thrice(_reader(shared, fake_runner)) == [None, None, None]
    said = _refusals(caplog)
    assert len(said) == 1 and "owned by uid 12345" in said[0], said


def test_a_symlink_is_refused_never_followed(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = shared.parent / "elsewhere.json"
    (shared / PUBLIC).rename(elsewhere)  # a root-owned, well-formed file: only the link is wrong
    (shared / PUBLIC).symlink_to(elsewhere)
    caplog.set_level(logging.INFO, "slurmlab.server")
    assert _read_thrice(_reader(shared, fake_runner)) == [None, None, None]
    said = _refusals(caplog)
    assert len(said) == 1 and "is a symlink" in said[0], said


def test_a_symlinked_directory_is_refused(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    link = shared.parent / "link"
    link.symlink_to(shared)
    caplog.set_level(logging.INFO, "slurmlab.server")
    assert _read_thrice(_reader(link, fake_runner)) == [None, None, None]
    assert len(_refusals(caplog)) == 1 and "is a symlink" in _refusals(caplog)[0]


def test_a_stale_file_is_ignored(
    shared: Path, fake_runner: FakeRunner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "slurmlab.server")
    later = _reader(shared, fake_runner, clock=lambda: time.time() + 1000)  # the service stopped 1000 s ago
    assert _read_thrice(later) == [None, None, None]
    said = _refusals(caplog)
    assert len(said) == 1 and "stale" in said[0], said
    assert _reader(shared, fake_runner).read() is not None  # the same files, fresh


def test_a_poll_of_another_cluster_is_not_used(shared: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "slurmlab.server")
    other = SharedPollReader(shared, "/tmp/some-sandbox/slurm.conf", OWNER_UID, "root")
    assert other.read() is None
    assert "not /tmp/some-sandbox/slurm.conf" in _refusals(caplog)[0]


def test_no_directory_means_polling_as_before(tmp_path: Path, fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    source = ClusterSource(fake_runner, user="root", shared=str(tmp_path / "none"))
    assert source.shared is not None and source.shared.read() is None


def test_private_data_is_read_from_scontrol_show_config() -> None:
    recorded = rec(CONFIG).stdout
    assert parse_private_data(recorded) == frozenset()
    assert parse_private_data(
        recorded.replace("PrivateData             = none", "PrivateData = jobs,usage")
    ) == {"jobs", "usage"}
    assert parse_private_data("no such line") == {"jobs", "nodes"}  # unknown: the safe side


def test_private_jobs_are_in_no_file_another_user_can_read(
    tmp_path: Path, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PrivateData=jobs (the recorded config with that one line as a site sets it): no job in the public file,
    nor a job id on its nodes; the owner reads theirs from their 0600 file; another viewer sees none."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    text = rec(CONFIG).stdout.replace("PrivateData             = none", "PrivateData             = jobs")
    directory = tmp_path / "poll"
    _service(fake_runner, directory, config=text)
    public = json.loads((directory / PUBLIC).read_text())
    assert public["jobs"] is None and public["private_data"] == ["jobs"]
    assert not any(slot["jobs"] for node in public["nodes"] for slot in node["gpus"])
    owner = _reader(directory, fake_runner).read()
    assert owner is not None and json.loads(owner.answers["queue:all"].body)["jobs"]
    stranger = _reader(directory, fake_runner, uid=4321, user="someone").read()
    assert stranger is not None
    assert json.loads(stranger.answers["queue:all"].body)["jobs"] == []
    assert not any(s["jobs"] for n in json.loads(stranger.answers["nodes"].body)["nodes"] for s in n["gpus"])


def test_the_service_refuses_a_directory_readers_would_refuse(
    tmp_path: Path, fake_runner: FakeRunner
) -> None:
    from slurmlab.errors import SlurmlabError

    directory = tmp_path / "poll"
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)  # as a careless `mkdir` under a umask of 0 leaves it
    with pytest.raises(SlurmlabError, match="writable by its group or by others"):
        SharedPollService(directory, runner=fake_runner).prepare()
