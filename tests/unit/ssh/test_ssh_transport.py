"""The SSH transport's pure parts and its local helpers, without a server.

ssh's words are recorded from real OpenSSH 9.2 runs against a loopback sshd (tests/unit/ssh/data; the server's
random port is written 2222 and a temporary known_hosts path /home/alice/.ssh/known_hosts). The remote wrapper is
run by a real /bin/sh, as sshd hands a command to the login shell; the askpass program and the relay run as the
real programs they are.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from slurmlab.errors import ControllerDownError, SlurmlabError
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLink, SshLinkError, SshTarget, link_failure, remote_words
from slurmlab.slurm.ssh import askpass as ssh_askpass
from slurmlab.slurm.ssh import relay as ssh_relay

DATA = Path(__file__).parent / "data"
TARGET = SshTarget("127.0.0.1", "slurmlabssh", 2222)
HOSTILE = [
    "a b",
    "it's",
    '"q"',
    "x; rm -rf ~",
    "$(id)",
    "`id`",
    "$HOME",
    "*",
    "back\\slash",
    "new\nline",
    "",
    "-n",
    "non-utf8 \udcff",
]


def _said(name: str) -> str:
    return (DATA / f"{name}.stderr").read_text()


# ---- addresses -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "host", "user", "port"),
    [
        ("ssh://login.example", "login.example", None, None),
        ("ssh://alice@login.example", "login.example", "alice", None),
        ("ssh://alice@login.example:2222", "login.example", "alice", 2222),
        ("ssh://alice@[::1]:22", "::1", "alice", 22),
        ("ssh://a%40b@login.example/", "login.example", "a@b", None),
    ],
)
def test_an_address_is_parsed(url: str, host: str, user: str | None, port: int | None) -> None:
    target = SshTarget.parse(url)
    assert (target.host, target.user, target.port) == (host, user, port)
    assert SshTarget.parse(target.url()) == target


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("alice@login.example", "not an ssh:// address"),
        ("ssh://alice:secret@login.example", "must not hold a password"),
        ("ssh://alice@login.example:99999", "not a number from 1 to 65535"),
        ("ssh://alice@login.example:port", "not a number"),
        ("ssh://alice@login.example/home", "no path"),
        ("ssh://", "no host"),
        ("ssh://-oProxyCommand=x", "starting with '-'"),
        ("ssh://-x@login.example", "starting with '-'"),
    ],
)
def test_a_bad_address_is_refused_with_words(url: str, words: str) -> None:
    with pytest.raises(SlurmlabError) as caught:
        SshTarget.parse(url)
    assert words in str(caught.value) and "ssh://user@" in str(caught.value)
    assert "secret" not in str(caught.value)


# ---- argv through a shell --------------------------------------------------------------------------------
def _through_sh(words: list[str], env: dict[str, str] | None = None) -> bytes:
    """What a POSIX login shell does with the one string ssh sends: ``$SHELL -c "<words joined by spaces>"``."""
    line = " ".join(words)
    return subprocess.run(["/bin/sh", "-c", line], capture_output=True, check=True, env=env).stdout


def test_every_word_reaches_the_remote_command_as_it_was() -> None:
    printed = _through_sh(["printf", "'%s\\0'", *remote_words(HOSTILE)])
    assert printed.split(b"\0")[:-1] == [os.fsencode(word) for word in HOSTILE]


def _remote_part(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


def test_the_wrapper_exports_the_runner_variables_and_drops_what_shapes_slurms_output() -> None:
    link = SshLink(TARGET)
    command = link.command(
        [
            "sh",
            "-c",
            'printf "%s|%s|%s|%s|%s" "$SLURM_CONF" "$X" "${SQUEUE_FORMAT-unset}" "${SLURM_TIME_FORMAT-unset}" "$1"',
            "sh",
            "$(id) a b",
        ],
        {"SLURM_CONF": "/etc/slurm dir/slurm.conf", "X": "it's; $(id)"},
    )
    assert command[0] == "ssh" and "StrictHostKeyChecking=yes" in command and "BatchMode=yes" in command
    login = {
        "PATH": os.environ["PATH"],
        "SQUEUE_FORMAT": "%i",
        "SLURM_TIME_FORMAT": "relative",
        "HOME": "/tmp",
    }
    printed = _through_sh(_remote_part(command), env=login).decode()
    assert printed == "/etc/slurm dir/slurm.conf|it's; $(id)|unset|unset|$(id) a b"


def test_a_relayed_command_writes_its_pid_where_the_kill_command_reads_it(tmp_path: Path) -> None:
    link = SshLink(TARGET)
    env = {"PATH": os.environ["PATH"], "XDG_RUNTIME_DIR": str(tmp_path)}
    # exec: the signalled process is the sleep itself, so nothing of the test outlives it (a shell that forks
    # its last command, as trixie's dash does, left an orphaned `sleep 30` behind in the 26.05 root)
    command = link.command(["sh", "-c", "echo $$; exec sleep 30"], pid_name="abc")
    proc = subprocess.Popen(
        ["/bin/sh", "-c", " ".join(_remote_part(command))],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        pid = proc.stdout.readline().strip().decode()
        # the kill command waits for the file: a signal sent as the command starts is not lost
        kill = _remote_part(link.kill_command("abc"))
        subprocess.run(["/bin/sh", "-c", " ".join([*kill, "TERM", "abc"])], env=env, check=True, timeout=10)
        assert proc.wait(timeout=10) == 128 + signal.SIGTERM
        assert not (tmp_path / "slurmlab-abc.pid").exists()  # the wrapper cleans up after its command
        assert pid.isdigit()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the wrapper and whatever it still runs
        proc.wait()


# ---- what ssh said --------------------------------------------------------------------------------------
def test_an_unknown_host_key_is_said_and_what_to_check() -> None:
    err = link_failure(TARGET, 255, _said("unknown-host-key"), connecting=True)
    assert isinstance(err, SshLinkError) and isinstance(err, ControllerDownError)
    assert "not in known_hosts" in str(err) and "ssh-keyscan -p 2222 127.0.0.1" in str(err)


def test_a_changed_host_key_is_said_as_the_attack_it_may_be() -> None:
    err = link_failure(TARGET, 255, _said("changed-host-key"), connecting=True)
    assert err is not None and "NOT the one known_hosts holds" in str(err)
    assert "ssh-keygen -R 127.0.0.1" in str(err) and "admins" in str(err)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("permission-denied", "login was refused (the server offered: publickey,keyboard-interactive)"),
        ("no-master-no-key", "login was refused"),
        ("connection-refused", "nothing answered at that address (Connection refused)"),
        ("unknown-host-name", "the host name is unknown (Name or service not known)"),
        ("server-gone-mid-command", "is down (Connection to 127.0.0.1 closed by remote host.)"),
    ],
)
def test_ssh_failures_are_said_in_words(name: str, words: str) -> None:
    err = link_failure(TARGET, 255, _said(name))
    assert err is not None and words in str(err), err
    assert err.stderr == _said(name) and err.returncode == 255


def test_a_master_cut_mid_command_is_told_from_a_command_that_exited_255() -> None:
    # a killed master leaves its sessions exiting 255 without a word; a remote command may exit 255 itself
    silent = _said("master-killed-mid-command")
    assert silent == ""
    down = link_failure(TARGET, 255, silent, master_up=lambda: False)
    assert down is not None and "ssh://slurmlabssh@127.0.0.1:2222 is down" in str(down)
    assert "%slurm use ssh://slurmlabssh@127.0.0.1:2222" in str(down)
    assert link_failure(TARGET, 255, _said("remote-exit-255"), master_up=lambda: True) is None
    assert link_failure(TARGET, 1, _said("permission-denied")) is None  # not ssh's status: the command's own


def test_a_runner_over_ssh_describes_itself_without_a_secret_and_comes_back_equal() -> None:
    link = SshLink(TARGET, options={"IdentityFile": "/home/alice/.ssh/id_ed25519"})
    runner = Runner(slurm_conf="/etc/slurm/slurm.conf", ssh=link, timeout=12)
    settings = runner.settings()
    assert settings["conf"] == "/etc/slurm/slurm.conf"
    assert Runner.from_settings(settings) == runner
    assert Runner.from_settings(Runner().settings()).ssh is None
    assert runner.which("squeue") == "squeue"  # the remote PATH decides
    assert runner.environ() == {"SLURM_CONF": "/etc/slurm/slurm.conf"}


# ---- the askpass program and the relay, as the programs they are -----------------------------------------
def test_askpass_hands_the_prompt_to_ask_and_the_answer_to_ssh(tmp_path: Path) -> None:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    sock = str(folder / "askpass.sock")
    env = {**os.environ, **ssh_askpass.environment(sock)}
    with ssh_askpass.Listener(sock, lambda prompt: f"answer to {prompt}") as listener:
        proc = subprocess.Popen([env["SSH_ASKPASS"], "Verification code: "], env=env, stdout=subprocess.PIPE)
        assert listener.serve_until(proc, 30) == 0
        assert proc.stdout is not None and proc.stdout.read() == b"answer to Verification code: \n"
        assert listener.prompts == ["Verification code: "]

    def cancelled(prompt: str) -> str:
        raise KeyboardInterrupt

    with ssh_askpass.Listener(sock, cancelled) as listener:
        proc = subprocess.Popen([env["SSH_ASKPASS"], "Password: "], env=env, stdout=subprocess.PIPE)
        assert listener.serve_until(proc, 30) == 1  # ssh takes a failing askpass as "no answer"
    assert not os.path.exists(sock)
    assert os.stat(folder / "askpass").st_mode & 0o077 == 0


_CHILD = (
    "import os, signal, sys, time\n"
    "print(os.getpgid(0) == os.getpid(), signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)\n"
    "signal.signal(signal.SIGINT, lambda *a: sys.exit(7))\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "time.sleep(30)\n"
)


def _relay(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """The relay around a stand-in for ssh (started as the runner starts it), and the stand-in's pid."""
    pid_file = tmp_path / "pid"
    kill = ["/bin/sh", "-c", 'kill -s "$1" "$(cat "$2")"', "kill", str(pid_file)]
    relay = subprocess.Popen(
        ssh_relay.relay_argv([sys.executable, "-c", _CHILD, str(pid_file)], kill),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert relay.stdout is not None
    # ssh runs in a session of its own, signals at their defaults: a Ctrl-C of the caller's group misses it
    assert relay.stdout.readline().split() == ["True", "True"]
    end = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < end
        time.sleep(0.05)
    return relay, int(pid_file.read_text())


def test_the_relay_turns_a_signal_of_the_group_into_a_kill_of_the_other_side(tmp_path: Path) -> None:
    relay, _ = _relay(tmp_path)
    try:
        os.killpg(
            relay.pid, signal.SIGINT
        )  # as end_step does: the stand-in hears of it through the kill command
        assert relay.wait(timeout=20) == 7
    finally:
        relay.kill()


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.02, 0.05])
def test_a_ctrl_c_that_lands_while_the_relay_starts_is_forwarded_not_lost(
    tmp_path: Path, delay: float
) -> None:
    # the signal comes before the relay's handlers can be in place (at once: its Python is still starting); the
    # old relay died of it or ignored it, and the step on the other side ran to its end (an over-SSH Ctrl-C test
    # under load saw its `sleep 60` step finish)
    pid_file = tmp_path / "pid"
    # as the real kill command does: wait for the pid file, the command may not have started yet
    kill = [
        "/bin/sh",
        "-c",
        'while [ ! -s "$2" ]; do sleep 0.02; done; kill -s "$1" "$(cat "$2")"',
        "kill",
        str(pid_file),
    ]
    with ssh_relay.signals_held():  # as Runner.popen starts a relay
        relay = subprocess.Popen(
            ssh_relay.relay_argv([sys.executable, "-c", _CHILD, str(pid_file)], kill),
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        time.sleep(delay)
        os.killpg(relay.pid, signal.SIGINT)
        assert relay.wait(timeout=30) == 7  # the stand-in for the remote command heard of it
    finally:
        relay.kill()


def test_signals_held_blocks_only_while_a_relay_starts_and_a_signal_meanwhile_comes_after() -> None:
    heard: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: heard.append(signum))
    try:
        with ssh_relay.signals_held():
            assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            # to this thread (the mask is a thread's, and a child inherits its starter's): pending while held
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            assert signal.SIGINT in signal.sigpending() and heard == []
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        end = time.monotonic() + 5
        while not heard and time.monotonic() < end:  # Python runs the handler at its next check
            time.sleep(0.01)
        assert heard == [signal.SIGINT]  # delivered after, as the caller's own Ctrl-C
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_ssh_ends_with_a_killed_relay(tmp_path: Path) -> None:
    relay, child = _relay(tmp_path)
    os.killpg(relay.pid, signal.SIGKILL)
    relay.wait(timeout=10)
    end = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and "Z" not in Path(f"/proc/{child}/stat").read_text().split()[2]:
        assert time.monotonic() < end, "ssh outlived its relay"
        time.sleep(0.05)
