"""Who may use a sandbox (its munge socket), its status words and restart's entry points: no Slurm needed."""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import Sandbox, access
from slurmlab.sandbox.control import SandboxStatus
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import RenderContext, render_slurm_conf

ACL = "system.posix_acl_access"


def decode(value: bytes) -> list[tuple[int, int, int]]:
    version = struct.unpack_from("<I", value)[0]
    assert version == 2
    return [struct.unpack_from("<HHI", value, 4 + 8 * i) for i in range((len(value) - 4) // 8)]


def test_acl_entries_keep_the_mode_and_add_each_user_under_a_mask() -> None:
    entries = access.acl_entries(0o700, [(1234, 0o1), (99, 0o6)])
    # kernel order: owner, named users by uid, group, mask, other
    assert entries == [
        (0x01, 7, 0xFFFFFFFF),
        (0x02, 6, 99),
        (0x02, 1, 1234),
        (0x04, 0, 0xFFFFFFFF),
        (0x10, 7, 0xFFFFFFFF),
        (0x20, 0, 0xFFFFFFFF),
    ]
    assert decode(access.encode_acl(entries)) == entries
    # no named user: no mask entry (a minimal ACL is the mode bits themselves)
    assert [t for t, _, _ in access.acl_entries(0o600, [])] == [0x01, 0x04, 0x20]


def test_grant_sets_and_removes_the_acl(tmp_path: Path) -> None:
    target = tmp_path / "munge"
    target.mkdir()
    nobody = access.AdmittedUser("nobody", 65534, (65534,))
    try:
        access.grant(target, 0o700, [nobody], 0o1)
    except SandboxError as exc:
        if "does not support POSIX ACLs" in str(exc):
            pytest.skip(str(exc))
        raise
    entries = decode(os.getxattr(target, ACL))
    assert (0x02, 1, 65534) in entries and (0x20, 0, 0xFFFFFFFF) in entries
    assert target.stat().st_mode & 0o707 == 0o700  # others get nothing; group bits show the mask
    access.grant(target, 0o700, [], 0o1)
    with pytest.raises(OSError) as info:
        os.getxattr(target, ACL)
    assert info.value.errno == errno.ENODATA
    assert target.stat().st_mode & 0o777 == 0o700


def test_unknown_or_malformed_users_are_refused_with_the_fix() -> None:
    with pytest.raises(SandboxError, match="no such Unix user") as info:
        access.resolve_users(["no-such-user-slurmlab"])
    assert "getent passwd" in str(info.value)
    for bad in ("", "-v", "a\0b"):
        with pytest.raises(SandboxError, match="--admit needs a Unix user name"):
            access.resolve_users([bad])
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert [u.name for u in access.resolve_users([me, me])] == [me]


def test_a_folder_an_admitted_user_cannot_enter_is_named() -> None:
    base = Path(tempfile.mkdtemp(prefix="slacc-", dir="/tmp"))  # /tmp lets everyone pass; mkdtemp is 0700
    try:
        inner = base / "sb" / "munge"
        inner.mkdir(parents=True)
        guest = access.AdmittedUser("guest", 54321, (54321,))
        assert access.unreachable_folder(guest, inner) == base
        base.chmod(0o701)
        assert access.unreachable_folder(guest, inner) is None
        base.chmod(0o710)  # group may pass: a member passes, an outsider does not
        assert (
            access.unreachable_folder(access.AdmittedUser("member", 54321, (base.stat().st_gid,)), inner)
            is None
        )
        assert access.unreachable_folder(guest, inner) == base
        base.chmod(0o700)
        assert access.unreachable_folder(access.AdmittedUser("owner", base.stat().st_uid, ()), inner) is None
    finally:
        shutil.rmtree(base)


def test_slurmd_timeout_is_rendered_and_checked(tmp_path: Path) -> None:
    prof = load_profile("seed").scaled(1)
    ctx = RenderContext(
        directory="/srv/sb",
        hostname="vm",
        user="root",
        ctld_port=6817,
        node_ports=(7001,),
        munge_socket="/srv/sb/munge/munged.sock",
        version=(22, 5),
        slurmd_timeout=15,
    )
    conf = render_slurm_conf(prof, ctx)
    assert "SlurmdTimeout=15\n" in conf and conf.startswith("# slurmlab sandbox")
    for bad in (0, 4, 10_000, True, "15"):
        with pytest.raises(SandboxError, match="slurmd_timeout"):
            Sandbox.up(profile="seed", nodes=1, directory=tmp_path / "sb", slurmd_timeout=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "sb").exists()


def test_admitting_an_unknown_user_starts_nothing(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no such Unix user"):
        Sandbox.up(profile="seed", nodes=1, directory=tmp_path / "sb", admit=["no-such-user-slurmlab"])
    assert not (tmp_path / "sb").exists()


def status(frozen: frozenset[str] = frozenset(), dead: tuple[str, ...] = ()) -> SandboxStatus:
    names = ("munged", "slurmctld", "slurmd:node1")
    procs = {n: (100 + i, n not in dead) for i, n in enumerate(names)}
    return SandboxStatus(
        Path("/srv/sb"), "seed", ("node1",), procs, {"slurmctld": 6817}, {"node1": "mixed*"}, frozen
    )


def test_status_names_a_frozen_and_a_dead_daemon_and_the_restart() -> None:
    healthy = status()
    assert healthy.running and "restart" not in str(healthy)
    frozen = status(frozen=frozenset({"slurmctld"}))
    assert not frozen.running and not frozen.stopped
    text = str(frozen)
    assert "PARTLY running" in text
    assert [ln for ln in text.splitlines() if "slurmctld" in ln and "pid" in ln][0].split()[3] == "FROZEN"
    assert "slurmlab sandbox restart --dir /srv/sb" in text
    assert "node1" in text and "not responding" in text
    dead = status(dead=("slurmd:node1",))
    assert dead.dead == ("slurmd:node1",)
    assert "slurmd:node1   pid 102      NOT RUNNING" in str(dead)
    assert status(dead=("munged", "slurmctld", "slurmd:node1")).stopped


def test_cli_knows_restart_and_admit() -> None:
    import argparse

    from slurmlab.commands import sandbox as cmd

    parser = argparse.ArgumentParser()
    cmd.register(parser.add_subparsers())
    args = parser.parse_args(["sandbox", "up", "--admit", "alice", "--admit", "bob"])
    assert args.admit == ["alice", "bob"]
    assert parser.parse_args(["sandbox", "up"]).admit is None  # a reused sandbox keeps whom it admits
    args = parser.parse_args(["sandbox", "restart", "--dir", "/srv/sb"])
    assert args.func is cmd._restart and args.directory == "/srv/sb"


def test_restart_of_a_missing_sandbox_says_how_to_start_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.cli import main

    assert main(["sandbox", "restart", "--dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "no sandbox in" in err and "sandbox up" in err
