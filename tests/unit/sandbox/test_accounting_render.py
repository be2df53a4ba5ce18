"""The sandbox's accounting, rendered: slurmdbd.conf, MariaDB's options, slurm.conf's accounting lines and the
sacctmgr setup. Pure functions; the files they make and the daemons run in tests/integration/sandbox."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import accounting_daemons
from slurmlab.sandbox.accounting import (
    AccountingContext,
    accounting_tres,
    render_slurmdbd_conf,
    setup_after_ctld,
    setup_before_ctld,
    slurm_conf_lines,
    users_to_add,
)
from slurmlab.sandbox.mariadb import (
    MariaDbFiles,
    create_database_argv,
    install_argv,
    render_options,
    server_argv,
    shutdown_argv,
)
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import RenderContext, render_slurm_conf
from slurmlab.sandbox.status import SandboxStatus
from slurmlab.slurm.runner import Runner

SOCK = "/srv/sb/munge/munged.sock"


def conf_map(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def ctx(port: int = 6819, user: str = "alice") -> AccountingContext:
    return AccountingContext("/srv/sb", user, port, SOCK)


def test_slurmdbd_listens_on_loopback_with_the_sandboxs_munge_and_a_database_of_its_own() -> None:
    conf = conf_map(render_slurmdbd_conf(ctx()))
    assert conf["DbdAddr"] == "127.0.0.1" and conf["DbdHost"] == "localhost" and conf["DbdPort"] == "6819"
    assert conf["AuthType"] == "auth/munge" and conf["AuthInfo"] == f"socket={SOCK}"
    assert conf["StorageType"] == "accounting_storage/mysql"
    assert conf["StorageHost"] == "localhost"  # a Unix socket, never TCP
    assert conf["StorageLoc"] == "slurmlab_acct" and conf["StorageUser"] == conf["SlurmUser"] == "alice"
    assert "StoragePass" not in conf  # the socket authenticates the Unix user: no password to leak
    assert conf["LogFile"].startswith("/srv/sb/log/") and conf["PidFile"].startswith("/srv/sb/run/")


def test_slurmdbd_binds_the_address_it_is_called_on_not_every_address() -> None:
    """DbdAddr only tells others where to call: slurmdbd binds every address unless its own file says
    NoInAddrAny (it does not read slurm.conf's CommunicationParameters), then the host name's address."""
    conf = conf_map(render_slurmdbd_conf(ctx()))
    assert conf["CommunicationParameters"] == "NoInAddrAny"
    debian = conf_map(
        render_slurmdbd_conf(AccountingContext("/srv/sb", "alice", 6819, SOCK, bind_address="127.0.1.1"))
    )
    assert debian["DbdAddr"] == "127.0.1.1" and debian["CommunicationParameters"] == "NoInAddrAny"
    # a host name that resolves to no loopback address: binding by name would leave the address called on
    anywhere = conf_map(
        render_slurmdbd_conf(AccountingContext("/srv/sb", "alice", 6819, SOCK, bind_address=None))
    )
    assert anywhere["DbdAddr"] == "127.0.0.1" and "CommunicationParameters" not in anywhere


@pytest.mark.parametrize("bad", ["alice bob", "a#b", "x\ny", ""])
def test_a_value_that_would_change_slurmdbd_conf_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        render_slurmdbd_conf(AccountingContext("/srv/sb", bad, 6819, SOCK))


@pytest.mark.parametrize("port", [0, 80, 70000])
def test_a_port_out_of_range_is_refused(port: int) -> None:
    with pytest.raises(ValueError, match="DbdPort"):
        render_slurmdbd_conf(ctx(port))


@pytest.mark.parametrize(
    ("types", "version", "want"),
    [
        (("gpu", "shard", "mps"), (22, 5), "gres/gpu,gres/shard"),
        (("gpu", "shard", "mps"), (24, 11), "gres/gpu,gres/shard,gres/gpumem,gres/gpuutil"),
        (("gpu",), (26, 5), "gres/gpu,gres/gpumem,gres/gpuutil"),
        ((), (26, 5), ""),
    ],
)
def test_accounted_tres_follow_the_profile_and_the_version(
    types: tuple[str, ...], version: tuple[int, int], want: str
) -> None:
    assert accounting_tres(types, version) == want


def test_slurm_conf_without_accounting_is_unchanged_and_with_it_points_at_slurmdbd() -> None:
    prof = load_profile("dgx-h100")
    base = RenderContext(
        directory="/srv/sb",
        hostname="vm",
        user="root",
        ctld_port=6817,
        node_ports=tuple(7001 + i for i in range(prof.nodes)),
        munge_socket=SOCK,
        version=(24, 11),
    )
    plain = conf_map(render_slurm_conf(prof, base))
    assert plain["AccountingStorageType"] == "accounting_storage/none"
    # the gatherer runs without storage too: sstat answers and a --mem overrun ends as OUT_OF_MEMORY
    assert plain["JobAcctGatherType"] == "jobacct_gather/linux"
    assert "OverMemoryKill" in plain["JobAcctGatherParams"].split(",")
    assert not {
        k for k in plain if k.startswith(("Priority", "AccountingStorageHost", "AccountingStorageEnforce"))
    }
    on = conf_map(render_slurm_conf(prof, RenderContext(**{**base.__dict__, "accounting_port": 6819})))
    assert on["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert on["AccountingStorageHost"] == "127.0.0.1" and on["AccountingStoragePort"] == "6819"
    assert on["AccountingStoragePass"] == SOCK  # the sandbox's munged, not the system's
    assert on["AccountingStorageTRES"] == "gres/gpu,gres/shard,gres/gpumem,gres/gpuutil"
    assert set(on["AccountingStorageEnforce"].split(",")) == {"associations", "limits", "qos", "safe"}
    assert on["PriorityType"] == "priority/multifactor" and int(on["PriorityWeightFairshare"]) > 0
    assert on["JobAcctGatherType"] == "jobacct_gather/linux"
    assert {k: v for k, v in on.items() if k in plain and v != plain[k]}.keys() == {"AccountingStorageType"}
    assert not any(x.startswith("AccountingStorageTRES") for x in slurm_conf_lines(6819, "", SOCK))
    debian = conf_map(
        render_slurm_conf(
            prof, RenderContext(**{**base.__dict__, "accounting_port": 6819, "bind_address": "127.0.1.1"})
        )
    )
    assert debian["AccountingStorageHost"] == "127.0.1.1"


def test_setup_makes_cluster_accounts_users_and_debug_qos_in_that_order() -> None:
    cmds = setup_before_ctld("sandbox", "alice", ["bob"])
    assert cmds[0] == ["add", "cluster", "sandbox"]
    assert [c[2] for c in cmds if c[:2] == ["add", "account"]] == ["research", "teaching"]
    adds = [c for c in cmds if c[:2] == ["add", "user"]]
    assert adds and all(c[2] == "alice,root,bob" for c in adds)
    assert "DefaultAccount=research" in adds[0]
    modify = cmds[-1]
    assert "QOS=normal,debug" in modify and "DefaultQOS=normal" in modify
    # the owner root is not named twice
    assert setup_before_ctld("sandbox", "root")[-1][3] == "name=root"


def test_the_gpu_limits_come_after_slurmctld_registered_its_tres() -> None:
    after = setup_after_ctld()
    limits = {c[3]: c[5:] for c in after}
    assert "MaxTRESPerUser=gres/gpu=4" in limits["name=normal"]
    assert "MaxWall=00:30:00" in limits["name=debug"]
    before = " ".join(" ".join(c) for c in setup_before_ctld("sandbox", "alice"))
    assert "gres/gpu" not in before  # sacctmgr refuses a TRES slurmctld has not registered yet


def test_accounting_on_by_default_leaves_jobs_without_gpu_caps() -> None:
    uncapped = {c[3]: c[5:] for c in setup_after_ctld(gpu_caps=False)}
    assert not any(x.startswith("MaxTRESPerUser") for settings in uncapped.values() for x in settings)
    assert "MaxWall=00:30:00" in uncapped["name=debug"] and "Priority=10" in uncapped["name=normal"]


def test_accounting_is_on_where_it_can_start_and_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.errors import SandboxError
    from slurmlab.sandbox import accounting_daemons as ad

    monkeypatch.setattr(ad, "_find", lambda name: None if name == "slurmdbd" else f"/usr/sbin/{name}")
    on, state = ad.resolve(None)
    assert (
        not on
        and "slurmdbd is not installed" in str(state["accounting_off"])
        and "apt-get" in str(state["accounting_off"])
    )
    assert ad.describe(Path("/nowhere"), {"accounting": False, **state}, {}).startswith(
        "off (slurmdbd is not"
    )
    with pytest.raises(SandboxError, match="slurmdbd is not installed"):
        ad.resolve(True)  # asked for: fails before any daemon starts
    assert ad.resolve(False) == (False, {"accounting_off": "--no-accounting was given", "gpu_caps": False})
    monkeypatch.setattr(ad, "_find", lambda name: f"/usr/sbin/{name}")
    assert ad.resolve(None) == (True, {"accounting_off": None, "gpu_caps": False})
    assert ad.resolve(True) == (True, {"accounting_off": None, "gpu_caps": True})


def test_users_admitted_later_get_the_same_associations() -> None:
    assert users_to_add("sandbox", []) == []
    cmds = users_to_add("sandbox", ["carol", "carol"])
    assert [c[2] for c in cmds if c[:2] == ["add", "user"]] == ["carol", "carol"]
    with pytest.raises(ValueError):
        users_to_add("sandbox", ["car ol"])


def test_mariadb_stays_in_the_sandbox_folder_on_a_socket_without_networking() -> None:
    files = MariaDbFiles(Path("/srv/sb"))
    opts = render_options(files)
    lines = opts.splitlines()
    assert "[mariadbd]" in lines and "skip-networking" in lines
    values = conf_map("\n".join(line for line in lines if "=" in line))
    assert values["socket"] == "/srv/sb/db/mysqld.sock" and values["datadir"] == "/srv/sb/db/data"
    assert all(
        v.startswith("/srv/sb/")
        for k, v in values.items()
        if k in ("socket", "datadir", "pid-file", "log-error")
    )
    assert not any(k in values for k in ("port", "bind-address"))
    assert install_argv("/usr/bin/mariadb-install-db", files, "alice")[1] == "--no-defaults"
    assert server_argv("/usr/sbin/mariadbd", files, as_root=False) == [
        "/usr/sbin/mariadbd",
        "--defaults-file=/srv/sb/db/my.cnf",
    ]
    assert server_argv("/usr/sbin/mariadbd", files, as_root=True)[-1] == "--user=root"
    assert shutdown_argv("/usr/bin/mariadb-admin", files, "alice")[-1] == "shutdown"
    assert "--socket=/srv/sb/db/mysqld.sock" in shutdown_argv("x", files, "alice")


def test_the_database_is_created_over_the_private_socket_before_slurmdbd_connects() -> None:
    files = MariaDbFiles(Path("/srv/sb"))
    argv = create_database_argv("/usr/bin/mariadb", files, "alice", "slurmlab_acct")
    assert argv[:2] == ["/usr/bin/mariadb", "--no-defaults"] and "--socket=/srv/sb/db/mysqld.sock" in argv
    assert argv[-1] == "CREATE DATABASE IF NOT EXISTS `slurmlab_acct`"
    for bad in ("x`; DROP DATABASE mysql; --", "a b", ""):
        with pytest.raises(ValueError, match="identifier"):
            create_database_argv("mariadb", files, "alice", bad)


def test_a_folder_that_would_break_the_options_file_is_refused() -> None:
    with pytest.raises(ValueError, match="options file"):
        render_options(MariaDbFiles(Path("/srv/a#b")))


def test_prepare_writes_slurmdbd_conf_readable_by_its_owner_only(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "slurmdbd.conf").write_text("old, world-readable")
    (tmp_path / "slurmdbd.conf").chmod(0o644)
    (tmp_path / "db" / "data" / "mysql").mkdir(parents=True)  # tables kept from an earlier start: no install
    accounting_daemons.prepare(tmp_path, AccountingContext(str(tmp_path), "alice", 6819, SOCK), {})
    st = (tmp_path / "slurmdbd.conf").stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()
    assert "DbdPort=6819" in (tmp_path / "slurmdbd.conf").read_text()
    assert stat.S_IMODE((tmp_path / "db").stat().st_mode) == 0o700
    assert "skip-networking" in (tmp_path / "db" / "my.cnf").read_text()


def test_a_failing_install_names_its_log_and_leaves_no_half_made_tables(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    fake = tmp_path / "install"
    fake.write_text(
        "#!/bin/sh\necho 'Installing MariaDB/MySQL system tables... FATAL ERROR: disk full'\n"
        'mkdir -p "${2#--datadir=}"/partial\nexit 1\n'
    )
    fake.chmod(0o755)
    with pytest.raises(SandboxError, match="mariadb-install-db failed") as info:
        accounting_daemons.prepare(
            tmp_path, AccountingContext(str(tmp_path), "alice", 6819, SOCK), {"install": str(fake)}
        )
    assert "disk full" in str(info.value) and "mariadb-install-db.out" in str(info.value)
    assert not (tmp_path / "db" / "data").exists()


def test_an_install_that_fails_once_is_tried_again(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    fake = tmp_path / "install"
    marker = tmp_path / "tried"
    fake.write_text(
        f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; echo 'first try fails'; exit 1; fi\n"
        'mkdir -p "${2#--datadir=}"/mysql\necho OK\n'
    )
    fake.chmod(0o755)
    accounting_daemons.prepare(
        tmp_path, AccountingContext(str(tmp_path), "alice", 6819, SOCK), {"install": str(fake)}
    )
    assert (tmp_path / "db" / "data" / "mysql").is_dir()
    assert "first try fails" in (tmp_path / "log" / "mariadb-install-db.first.out").read_text()


def test_missing_mariadb_says_which_packages_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accounting_daemons.shutil, "which", lambda *a, **k: None)
    with pytest.raises(SandboxError, match="not installed") as info:
        accounting_daemons.programs()
    assert "apt-get install slurmdbd mariadb-server" in str(info.value)
    assert "--no-accounting" in str(info.value)


def test_status_says_whether_accounting_is_on() -> None:
    procs = {"munged": (10, True), "slurmdbd": (11, False), "mariadbd": (12, True)}
    off = accounting_daemons.describe(Path("/nonexistent"), {"accounting": False}, procs)
    assert off == "off"
    on = accounting_daemons.describe(
        Path("/nonexistent"), {"accounting": True, "ports": {"slurmdbd": 1}}, procs
    )
    assert on.startswith("on (slurmdbd DOES NOT ANSWER on port 1; mariadbd DOES NOT ANSWER")
    st = SandboxStatus(Path("/x"), "seed", ("node1",), procs, {}, accounting=on)
    assert f"  accounting     {on}" in str(st).splitlines()
    assert "accounting" not in str(SandboxStatus(Path("/x"), "seed", ("node1",), procs, {}))


def test_a_database_server_that_exits_fails_the_start_at_once_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "db").mkdir()
    fake = tmp_path / "mariadbd"
    fake.write_text(
        f"#!/bin/sh\necho '[ERROR] InnoDB: Unable to lock ./ibdata1 error: 11' >> {tmp_path}/log/mariadbd.log\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    state: dict[str, object] = {
        "pids": {},
        "ports": {"slurmdbd": 6819},
        "user": "alice",
        "cluster": "sandbox",
    }
    started: list[subprocess.Popen[bytes]] = []

    def run_start(exe: str, argv: list[str], name: str, env: Mapping[str, str]) -> None:
        started.append(subprocess.Popen(argv, executable=exe))
        pids = state["pids"]
        assert isinstance(pids, dict)
        pids[name] = started[-1].pid

    progs = {"mariadbd": str(fake), "admin": "true", "client": "true", "slurmdbd": "true", "sacctmgr": "true"}
    try:
        # "stopped", not "did not open its socket within": the exit is seen, not waited out
        with pytest.raises(SandboxError, match="mariadbd stopped") as info:
            accounting_daemons.start(tmp_path, state, progs, run_start, Runner(), [], timeout=60)
    finally:
        for proc in started:
            proc.wait()
    assert "Unable to lock ./ibdata1" in str(info.value) and "mariadbd.log" in str(info.value)
