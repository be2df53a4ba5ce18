"""``%sshare --class``: fair-share told in words (my FairShare, who in my accounts used how much GPU time), from
recorded sshare output through FakeRunner; and, where the cluster keeps no accounting, the words that say so
rather than an error (lesson 09 runs on the default sandbox, which has none)."""

from __future__ import annotations

from typing import Any

import pytest

from slurmlab.core.diagnosis.fairshare import gpu_time, share_story
from slurmlab.core.slurm.sshare import parse_sshare
from slurmlab.slurm.share_queries import ShareStory, story_of_my_accounts
from slurmlab.testing import FakeRunner, recorded

ALL = recorded(
    "24.11/sshare/a02_sshare_all.txt"
).stdout  # sshare -a of a sandbox with accounting: root's jobs
OFF = recorded("22.05/sshare/a07_sshare_accounting_off.txt").stdout  # the same sshare without accounting

# a class account in the shape sshare prints (the recordings' layout: account lines indented one space per level,
# users under them); three students, bob over his share, carol unused: the words are what is tested here
CLASS = """\
root|||0.000000|1000||1.000000|||cpu=100,gres/gpu=900
 workshop||1|1.000000|1000|1.000000|1.000000||1.000000|cpu=100,gres/gpu=600
  workshop|alice|1|0.333333|300|0.300000|0.300000|0.666667|1.111111|cpu=30,gres/gpu=180
  workshop|bob|1|0.333333|700|0.700000|0.700000|0.333333|0.476190|cpu=70,gres/gpu=400
  workshop|carol|1|0.333333|0|0.000000|0.000000|1.000000|inf|cpu=0,gres/gpu=0
"""


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_user", lambda: "root")


def test_gpu_time_in_words() -> None:
    assert gpu_time(None) == "GPU time not accounted"
    assert gpu_time(0) == "0 GPU-minutes" and gpu_time(0.4) == "under 1 GPU-minute"
    assert gpu_time(2) == "2 GPU-minutes" and gpu_time(180) == "3.0 GPU-hours"


def test_the_story_names_my_fairshare_and_who_used_what_of_the_class() -> None:
    lines = share_story(parse_sshare(CLASS), "bob")
    assert lines == [
        "account workshop: your FairShare 0.33: you have used more than your share of account workshop lately "
        "(70% of its usage for 33% of its shares): your jobs start after those of users who used less; this "
        "fades as your past usage decays",
        "in account workshop lately (decayed): you 6.7 GPU-hours, alice 3.0 GPU-hours, carol 0 GPU-minutes; of "
        "the account's 10.0 GPU-hours",
    ]
    carol = share_story(parse_sshare(CLASS), "carol")
    assert carol[0].startswith("account workshop: your FairShare 1.00: you have not used account workshop")
    assert carol[1].startswith("in account workshop lately (decayed): bob 6.7 GPU-hours, alice 3.0")
    assert share_story(parse_sshare(CLASS), "nobody") == []


def test_a_big_class_is_counted_not_listed() -> None:
    students = "".join(
        f"  workshop|user{i:02d}|1|0.050000|{i}|0.001000|0.001000|0.500000|1.000000|cpu=1,gres/gpu={i}\n"
        for i in range(20)
    )
    lines = share_story(
        parse_sshare(CLASS.splitlines(keepends=True)[0] + CLASS.splitlines()[1] + "\n" + students), "user03"
    )
    assert "user19 19 GPU-minutes" in lines[1] and "user03" not in lines[1]  # the eight who used most
    assert "12 others less" in lines[1]


def test_sshare_class_tells_the_story_from_one_sshare_of_everyone(
    ip: Any, fake_runner: FakeRunner, as_root: None
) -> None:
    fake_runner.on(["sshare", ...], stdout=ALL)
    story = ip.run_line_magic("sshare", "--class")
    assert isinstance(story, ShareStory) and story.accounting
    assert fake_runner.history == [[*fake_runner.history[0][:-1], "--all"]]  # one call, every user's lines
    assert fake_runner.history[0][0] == "sshare" and fake_runner.history[0][1] == "--parsable2"
    text = story.text()
    assert "account research: your FairShare 1.00: you have used" in text
    assert "in account research lately (decayed): you 2 GPU-minutes; of the account's 2 GPU-minutes" in text
    assert "in account teaching lately (decayed): you 0 GPU-minutes; of the account's 0 GPU-minutes" in text
    assert str(story) == text


def test_sshare_class_without_accounting_says_what_is_missing_without_an_error(
    ip: Any, fake_runner: FakeRunner, as_root: None
) -> None:
    fake_runner.on(["sshare", ...], stdout=OFF)
    story = ip.run_line_magic("sshare", "--class")
    assert isinstance(story, ShareStory) and not story.accounting
    text = story.text()
    assert text.startswith("this cluster keeps no accounting: fair-share does not order jobs here"), text
    assert "no per-user GPU cap" in text and "--accounting" in text


def test_sshare_class_when_slurmdbd_does_not_answer(fake_runner: FakeRunner, as_root: None) -> None:
    fake_runner.on(
        ["sshare", ...],
        stderr="sshare: error: Problem talking to the database: Connection refused\n",
        returncode=1,
    )
    story = story_of_my_accounts()
    assert not story.accounting and "Problem talking to the database" in story.text()


def test_a_line_that_does_not_parse_is_a_warning_under_the_story(
    ip: Any, fake_runner: FakeRunner, as_root: None
) -> None:
    fake_runner.on(["sshare", ...], stdout=ALL + "  research|mallory|x|y\n")
    text = ip.run_line_magic("sshare", "--class").text()
    assert "account research: your FairShare" in text
    assert text.splitlines()[-1].startswith("warning: 1 sshare line(s) could not be read"), text
