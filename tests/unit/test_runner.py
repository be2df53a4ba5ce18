"""The one runner: argv only, timeouts, errors mapped from Slurm's own messages."""

from __future__ import annotations

import asyncio
import sys

import pytest
from shared_paths import list_shared

from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    SlurmError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)
from slurmlab.slurm.runner import Runner, classify_failure


def test_rejects_a_shell_string() -> None:
    with pytest.raises(TypeError, match="argv"):
        Runner().run("squeue -h")  # type: ignore[arg-type]


def test_missing_command_names_the_install() -> None:
    with pytest.raises(SlurmNotFoundError) as info:
        Runner().run(["squeue-not-installed-xyz"])
    assert "apt-get install slurm-client" in str(info.value)


def test_timeout_kills_and_says_controller_not_responding() -> None:
    with pytest.raises(SlurmTimeoutError) as info:
        Runner(timeout=0.3).run([sys.executable, "-c", "import time; time.sleep(5)"])
    assert "not responding" in str(info.value)
    assert isinstance(info.value, ControllerDownError)


def test_async_twin_same_errors_and_output() -> None:
    r = Runner(timeout=0.3)
    res = asyncio.run(r.arun([sys.executable, "-c", "print('hi')"], timeout=10))
    assert res.stdout.strip() == "hi" and res.ok
    with pytest.raises(SlurmTimeoutError):
        asyncio.run(r.arun([sys.executable, "-c", "import time; time.sleep(5)"]))
    with pytest.raises(SlurmError) as info:
        asyncio.run(r.arun([sys.executable, "-c", "import sys; sys.exit('squeue: error: boom')"], timeout=10))
    assert "boom" in str(info.value) and info.value.returncode == 1


def test_env_carries_slurm_conf_and_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c1\n")
    r = Runner(slurm_conf=str(conf), cluster="c1", env={"A": "1"})
    code = "import os; print(os.environ['SLURM_CONF'], os.environ['SLURM_CLUSTERS'], os.environ['A'])"
    assert r.run([sys.executable, "-c", code]).stdout.split() == [str(conf), "c1", "1"]


@pytest.mark.parametrize(
    "stderr, kind",
    [
        ("squeue: error: Munge decode failed: Socket communication error\n"
         "slurm_load_jobs error: Protocol authentication error", MungeError),
        ("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", ControllerDownError),
        ("squeue: error: slurm_receive_msg: Socket timed out on send/recv operation", ControllerDownError),
        ("slurm_load_jobs error: Invalid job id specified", JobNotFoundError),
        ("scancel: error: Kill job error on job id 99: Invalid job id specified", JobNotFoundError),
        ("salloc: error: Unable to allocate resources: Connection timed out", SlurmError),
    ],
)
def test_classify_known_messages(stderr: str, kind: type) -> None:
    err = classify_failure(["squeue"], 1, stderr)
    assert type(err) is kind
    assert stderr.splitlines()[-1] in str(err)  # Slurm's own words are always shown


FIXTURE_STDERR = list_shared("slurm", "22.05", pattern="e*.stderr") + list_shared("slurm", "24.11", pattern="e*.stderr")


@pytest.mark.parametrize("path", FIXTURE_STDERR, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_refusals_are_plain_slurm_errors_with_slurms_message(path) -> None:  # type: ignore[no-untyped-def]
    text = path.read_text()
    err = classify_failure(["salloc"], 1, text)
    # a refused request is not a controller outage, and the message is Slurm's own
    assert not isinstance(err, ControllerDownError | MungeError)
    last_error = [ln for ln in text.splitlines() if "error" in ln or "aborted" in ln][-1]
    assert last_error.strip() in str(err)


def test_node_configuration_refusal_gets_a_next_step() -> None:
    err = classify_failure(
        ["salloc"], 1, "salloc: error: Job submit/allocate failed: Requested node configuration is not available"
    )
    assert err.hint and "sinfo" in err.hint


def test_pyslurm_backend_is_opt_in_and_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.errors import MissingExtraError
    from slurmlab.slurm import pyslurm_backend, queries

    monkeypatch.delenv("SLURMLAB_BACKEND", raising=False)
    assert not pyslurm_backend.selected()
    monkeypatch.setenv("SLURMLAB_BACKEND", "pyslurm")
    assert pyslurm_backend.selected()
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # not importable here (needs Slurm 25.11)
    with pytest.raises(MissingExtraError) as info:
        queries.brief_states(["1"], Runner())
    assert "pyslurm" in str(info.value)


def test_a_missing_slurm_conf_fails_at_once_with_the_fix() -> None:
    import time

    t0 = time.monotonic()
    with pytest.raises(SlurmError) as info:
        Runner(slurm_conf="/nonexistent/slurm.conf", timeout=30).run(["sinfo", "--version"])
    assert time.monotonic() - t0 < 1  # Slurm itself would retry for 60 s
    assert "/nonexistent/slurm.conf" in str(info.value) and "sandbox" in str(info.value)
