"""The teacher's settings of the hub's spawn form (issue 31 point 1): prefilled or locked fields, checked when
read and enforced whatever the browser sends; the seats' passwords kept only as hashes."""

from __future__ import annotations

import os

import pytest

from slurmlab.hub.passwords import hash_secret, verify_secret
from slurmlab.hub.settings import check_form_settings, parse_form, with_settings

PARTITIONS = ["debug", "gpu"]


def test_settings_are_read_as_value_and_lock_per_field() -> None:
    raw = {"ngpus": {"value": 1, "locked": True}, "runtime": {"value": "30"}}
    assert check_form_settings(raw, PARTITIONS) == {
        "ngpus": {"value": "1", "locked": True},
        "runtime": {"value": "30", "locked": False},
    }


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ([], "JSON object"),
        ({"gpus": {"value": 1}}, "no field 'gpus'"),
        ({"ngpus": 1}, '"value"'),
        ({"ngpus": {"value": 1, "lock": True}}, '"value"'),
        ({"ngpus": {"value": 1, "locked": "yes"}}, "true or false"),
        ({"ngpus": {"value": "99999"}}, "whole number"),
        ({"runtime": {"value": "10\n#SBATCH --uid=0"}}, "minutes or"),
        ({"partition": {"value": "nowhere"}}, "no partition"),
    ],
)
def test_wrong_settings_are_refused_saying_what_is_wrong(raw: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        check_form_settings(raw, PARTITIONS)


def test_a_locked_field_holds_whatever_is_sent_and_a_prefilled_one_only_when_nothing_is() -> None:
    settings = check_form_settings(
        {"ngpus": {"value": 1, "locked": True}, "runtime": {"value": "30"}}, PARTITIONS
    )
    sent = {"ngpus": ["8"], "runtime": ["1:00:00"]}
    assert with_settings(sent, settings) == {"ngpus": ["1"], "runtime": ["1:00:00"]}
    assert with_settings({}, settings) == {"ngpus": ["1"], "runtime": ["30"]}
    assert with_settings({"runtime": [" "]}, settings)["runtime"] == ["30"]


def test_a_reservation_is_taken_only_when_the_teacher_set_it() -> None:
    asked = {"reservation": ["workshop"]}
    assert parse_form(asked, PARTITIONS, ("workshop",))["reservation"] == "workshop"
    with pytest.raises(ValueError, match="no reservation"):
        parse_form(asked, PARTITIONS)
    with pytest.raises(ValueError, match="no reservation"):
        parse_form({"reservation": ["other"]}, PARTITIONS, ("workshop",))
    assert "reservation" not in parse_form({}, PARTITIONS)


def test_the_form_shows_prefilled_values_and_locks_read_only() -> None:
    pytest.importorskip("batchspawner")
    from slurmlab.hub.spawner import options_form_html

    html = options_form_html(
        PARTITIONS,
        {"ngpus": {"value": "2", "locked": True}, "partition": {"value": "gpu", "locked": False}},
    )
    assert 'id="ngpus" name="ngpus" type="number" min="0" max="64" value="2" readonly' in html
    assert '<option value="gpu" selected>' in html and 'value="1:00:00">' in html
    locked = options_form_html(PARTITIONS, {"partition": {"value": "gpu", "locked": True}})
    assert "<select" not in locked and 'name="partition" value="gpu" readonly' in locked
    assert "&lt;b&gt;" in options_form_html(PARTITIONS, {"runtime": {"value": "<b>"}})


def test_a_seat_password_is_kept_as_a_salted_hash_that_only_it_matches() -> None:
    line = hash_secret("abcd-efgh-jkmn")
    assert "abcd-efgh-jkmn" not in line and line.startswith("scrypt$")
    assert verify_secret("abcd-efgh-jkmn", line)
    assert not verify_secret("abcd-efgh-jkmm", line)
    assert hash_secret("abcd-efgh-jkmn") != line  # salted
    for forged in ("", "plain", line.replace("16384", "1048576"), line[:-2] + "zz", "scrypt$a$b$c$d$e"):
        assert not verify_secret("abcd-efgh-jkmn", forged)


def test_the_reservation_variables_are_slurms_and_survive_inside_the_students_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    from slurmlab.hub.settings import RESERVATION_VARIABLES, reservation_environment
    from slurmlab.slurm.runner import Runner

    # the names are salloc's, sbatch's and srun's INPUT ENVIRONMENT VARIABLES in each version's man pages
    data = Path(__file__).resolve().parents[2] / "data" / "slurm_environment"
    for version in ("22.05", "24.11", "26.05"):
        documented = set((data / f"input-{version}.txt").read_text().split())
        assert set(RESERVATION_VARIABLES) <= documented, version
    # the student's kernel runs inside their server's job: slurmlab's own commands drop that job's variables
    # (SLURM_GPUS would ask for its GPUs) but keep the class's reservation the hub set
    for name in list(os.environ):
        monkeypatch.delenv(name)
    server_job = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "41", "SLURM_GPUS": "1", "SBATCH_PARTITION": "gpu"}
    for name, value in {**server_job, **reservation_environment("workshop")}.items():
        monkeypatch.setenv(name, value)
    env = Runner().environ()
    assert {n: env.get(n) for n in RESERVATION_VARIABLES} == dict.fromkeys(RESERVATION_VARIABLES, "workshop")
    assert "SLURM_GPUS" not in env and "SBATCH_PARTITION" not in env and "SLURM_JOB_ID" not in env
