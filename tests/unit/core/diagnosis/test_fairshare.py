"""Fair-share in plain words: where a user stands against their share, and what each job state means."""

from __future__ import annotations

import pytest

from slurmlab.core.diagnosis.fairshare import (
    explain_shares,
    owned_by,
    parents,
    standing,
    state_in_words,
    usage_part,
)
from slurmlab.core.slurm.sacct import parse_sacct
from slurmlab.core.slurm.sshare import parse_sshare
from slurmlab.testing import recorded

TREE = """\
root|||0.000000|1000||1.000000|||cpu=100,gres/gpu=600
 physics||3|0.750000|200|0.200000|0.200000||3.750000|cpu=20,gres/gpu=100
  physics|alice|1|0.500000|180|0.180000|0.900000|0.400000|0.555556|cpu=18,gres/gpu=90
  physics|bob|1|0.500000|20|0.020000|0.100000|0.900000|5.000000|cpu=2,gres/gpu=10
 biology||1|0.250000|800|0.800000|0.800000||0.312500|cpu=80,gres/gpu=500
  biology|alice|1|1.000000|800|0.800000|1.000000|0.100000|1.000000|cpu=80,gres/gpu=500
  biology|carol|1|1.000000|0|0.000000|0.000000|1.000000|inf|cpu=0,gres/gpu=0
"""


def test_parents_follow_the_indentation() -> None:
    records = parse_sshare(TREE)
    up = parents(records)
    assert up[0] is None
    names = [
        (r.account, r.user, p.account if p else None, p.user if p else "-")
        for r, p in zip(records, up, strict=True)
    ]
    assert names[1] == ("physics", None, "root", None)
    assert names[2] == ("physics", "alice", "physics", None)
    assert names[5] == ("biology", "alice", "biology", None)


def test_usage_part_is_raw_usage_over_the_parents() -> None:
    records = parse_sshare(TREE)
    up = parents(records)
    assert usage_part(records[2], up[2]) == pytest.approx(180 / 200)
    assert usage_part(records[1], up[1]) == pytest.approx(200 / 1000)
    # no parent to compare with: sshare's own EffectvUsage
    assert usage_part(records[2], None) == records[2].effective_usage


@pytest.mark.parametrize(
    ("usage", "shares", "raw", "expected"),
    [
        (0.9, 0.5, 180, "over"),
        (0.1, 0.5, 20, "under"),
        (0.5, 0.5, 100, "about"),
        (0.0, 0.5, 0, "unused"),
        (0.3, 0.0, 5, "over"),
        (None, 0.5, 5, "unknown"),
        (0.6, 0.5, 5, "about"),
        (0.7, 0.5, 5, "over"),
    ],
)
def test_standing(usage: float | None, shares: float, raw: int, expected: str) -> None:
    assert standing(usage, shares, raw) == expected


def test_explanations_say_where_each_of_my_associations_stands_and_why() -> None:
    alice = explain_shares(parse_sshare(TREE), "alice")
    assert [(e.account, e.standing, e.account_standing) for e in alice] == [
        ("physics", "over", "under"),
        ("biology", "about", "over"),
    ]
    physics, biology = alice
    assert (
        "more than your share" in physics.sentence
        and "start after those of users who used less" in physics.sentence
    )
    assert "90% of its usage for 50% of its shares" in physics.sentence
    assert "used less than its share" in physics.sentence
    assert "account biology itself has used more than its share" in biology.sentence
    assert physics.gpu_minutes == 90.0 and physics.fair_share == 0.4
    bob = explain_shares(parse_sshare(TREE), "bob")
    assert bob[0].standing == "under" and "start before those of users who used more" in bob[0].sentence
    assert explain_shares(parse_sshare(TREE), "carol")[0].standing == "unused"
    assert explain_shares(parse_sshare(TREE), "mallory") == []


def test_a_user_name_is_matched_whole() -> None:
    # "ali" is not alice: names are compared as they are, never as prefixes
    assert explain_shares(parse_sshare(TREE), "ali") == []


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_the_recorded_sandbox_user_gets_one_explanation_per_account(version: str) -> None:
    records = parse_sshare(recorded(f"{version}/sshare/a01_sshare_mine.txt").stdout)
    users = {r.user for r in records if r.user}
    (user,) = users
    explained = explain_shares(records, user)
    assert [e.account for e in explained] == [r.account for r in records if r.user == user]
    by = {e.account: e for e in explained}
    # the recording ran its GPU jobs in research only
    assert by["teaching"].standing == "unused" and by["research"].standing != "unused"
    assert by["research"].account_standing == "over"  # all the cluster's usage, a third of its shares


def test_state_words() -> None:
    assert state_in_words("OUT_OF_MEMORY").startswith("killed")
    assert state_in_words("CANCELLED", "alice") == "cancelled by alice"
    assert state_in_words("TIMEOUT") == "stopped at its time limit"
    assert state_in_words("SOMETHING_NEW") == "something new"  # a word Slurm adds later still reads


def test_owned_by_keeps_steps_of_my_jobs_and_nothing_of_others() -> None:
    text = recorded("22.05/sacct/a02_sacct_recent.txt").stdout
    records = parse_sacct(text)
    uid = next(r.uid for r in records if r.is_job and r.uid is not None)
    mine = owned_by(records, uid)
    assert mine and any(not r.is_job for r in mine)  # steps carry no UID but belong to their job
    assert owned_by(records, uid + 4242) == []
