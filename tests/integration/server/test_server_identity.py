"""One "who am I" (issue 12, point 4): the sidebar's cancel route, ``%scancel`` and ``%squeue``'s "mine"
all ask ``slurmlab.slurm.identity.current_uid`` (the effective uid), so changing that one function
changes every answer. Recorded Slurm 22.05 output (FakeRunner): job 19 belongs to uid 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_slurm import JOB, OWNER_UID, cluster, job_in
from IPython.core.error import UsageError
from tornado.httpclient import HTTPClientError

from slurmlab.server import contract
from slurmlab.slurm import identity
from slurmlab.testing import FakeRunner

SOMEONE_ELSE = 4242


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config({"ServerApp": {"jpserver_extensions": {"slurmlab.server": True}}})


@pytest.fixture
def fake() -> Iterator[FakeRunner]:
    from slurmlab.slurm.runner import set_runner

    runner = FakeRunner()
    cluster(runner)
    job_in(runner, "running")
    old = set_runner(runner)
    try:
        yield runner
    finally:
        set_runner(old)
        runner.close()


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    old = Session.of(ip)
    Session(ip)
    try:
        yield ip
    finally:
        old.install(ip)
        ip.run_line_magic("unload_ext", "slurmlab.magics")


def _be(monkeypatch: pytest.MonkeyPatch, uid: int) -> list[int]:
    asked: list[int] = []

    def current_uid() -> int:
        asked.append(uid)
        return uid

    monkeypatch.setattr(identity, "current_uid", current_uid)
    return asked


async def _cancel(jp_fetch: Any) -> tuple[int, Any]:
    try:
        answer = await jp_fetch("slurmlab", "api", "jobs", JOB, "cancel", method="POST", body="{}")
    except HTTPClientError as exc:
        assert exc.response is not None
        return exc.code, json.loads(exc.response.body)
    return answer.code, json.loads(answer.body)


async def test_both_cancel_paths_ask_the_one_identity(
    jp_fetch: Any, jp_serverapp: Any, fake: FakeRunner, shell: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    jp_serverapp.web_app.settings["slurmlab_poller"].source.runner = fake
    asked = _be(monkeypatch, SOMEONE_ELSE)

    code, body = await _cancel(jp_fetch)
    assert code == 403 and body["reason"] == "Not your job", body
    assert set(body) == set(contract.ErrorAnswer.__annotations__)
    with pytest.raises(UsageError, match="slurmlab acts only on your own jobs"):
        shell.run_line_magic("scancel", JOB)
    assert len(asked) >= 2  # each path asked it
    assert not fake.called(["scancel", ...])  # and neither reached scancel

    # the same function, now saying "I am the owner": both cancel
    asked = _be(monkeypatch, OWNER_UID)
    shell.run_line_magic("scancel", JOB)
    assert fake.called(["scancel", JOB]) and asked
    code, body = await _cancel(jp_fetch)
    assert code == 200 and body == {"job_id": JOB, "cancelled": True, "user": body["user"]}


def test_squeue_mine_is_the_same_identity(
    fake: FakeRunner, shell: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _be(monkeypatch, SOMEONE_ELSE)
    monkeypatch.setenv("USER", identity.user_name(OWNER_UID))  # the environment names the owner: no matter
    nobody = str(shell.run_line_magic("squeue", ""))
    assert nobody.startswith(f"jobs of {SOMEONE_ELSE}") and "(no jobs)" in nobody
    _be(monkeypatch, OWNER_UID)
    owner = str(shell.run_line_magic("squeue", ""))
    assert owner.startswith(f"jobs of {identity.user_name(OWNER_UID)}") and "(no jobs)" not in owner
