"""No Slurm configured here: one clear error naming `%slurm sandbox up`, at once (issue 13, point 1)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slurmlab.errors import ControllerDownError, SlurmNotConfiguredError
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.runner import Runner

# recorded from Slurm 22.05 (Debian 12): `env -u SLURM_CONF sinfo` on a machine without /etc/slurm/slurm.conf
NO_CONFIG = """\
sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host
sinfo: error: fetch_config: DNS SRV lookup failed
sinfo: error: _establish_config_source: failed to fetch config
sinfo: fatal: Could not establish a configuration source
"""


def test_slurms_words_for_no_configuration_become_one_error_with_the_way_on() -> None:
    err = classify_failure(["sinfo"], 1, NO_CONFIG)
    assert isinstance(err, SlurmNotConfiguredError) and isinstance(err, ControllerDownError)
    assert "Could not establish a configuration source" in str(err)
    assert err.hint and "%slurm sandbox up" in err.hint and "%slurm use" in err.hint


def test_a_missing_slurm_conf_fails_at_once_not_after_slurms_60_s_of_retries(tmp_path: Path) -> None:
    runner = Runner(slurm_conf=str(tmp_path / "gone" / "slurm.conf"))
    t0 = time.monotonic()
    with pytest.raises(SlurmNotConfiguredError, match="which does not exist") as info:
        runner.run(["sinfo"])
    with pytest.raises(SlurmNotConfiguredError):
        runner.popen(["srun", "hostname"])
    assert time.monotonic() - t0 < 1
    assert info.value.hint and "%slurm sandbox up" in info.value.hint
