"""Slurm's pending reasons in plain words: every name Slurm's source has (22.05 to 26.05, recorded with its
commits in data/slurm_job_state_reasons.txt) is explained, with what would help where something would."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmlab.core.slurm.reasons import ReasonExplained, explain_reason, plain_reason

DATA = Path(__file__).parent / "data" / "slurm_job_state_reasons.txt"


def _slurm_names() -> list[tuple[str, str]]:
    rows = []
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            name, releases = line.split("\t")
            rows.append((name, releases))
    return rows


NAMES = _slurm_names()


def test_the_recorded_list_is_slurms_whole_list() -> None:
    names = [n for n, _ in NAMES]
    assert len(names) == len(set(names)) >= 200
    # a few that only some releases have: the list spans 22.05 to 26.05
    releases = dict(NAMES)
    assert "22.05.11" in releases["FrontEndDown"] and "26.05.3" not in releases["FrontEndDown"]
    assert "22.05.11" not in releases["NvidiaImexChannels"] and "26.05.3" in releases["NvidiaImexChannels"]
    assert (
        "22.05.11" not in releases["MaxGRESRunMinsPerUser"] and "24.11.7" in releases["MaxGRESRunMinsPerUser"]
    )


@pytest.mark.parametrize(("name", "releases"), NAMES, ids=[n for n, _ in NAMES])
def test_every_reason_in_slurms_source_is_in_plain_words(name: str, releases: str) -> None:
    explained = explain_reason(name)
    if name == "None":  # Slurm's "no reason": nothing to show
        assert explained is None and plain_reason(name) == ""
        return
    assert explained is not None and explained.known, f"{name} ({releases}) has no plain words"
    assert explained.code == name and explained.words and name not in explained.words
    if explained.never:  # waiting does not help: the user must hear what does
        assert explained.hint, name
    assert plain_reason(name).startswith(explained.words) and f"({name})" in plain_reason(name)


@pytest.mark.parametrize(
    ("reason", "words", "hint", "never"),
    [
        ("PartitionConfig", "than its partition allows or has", "ask for less", True),
        ("Resources", "in use by other jobs", "", False),
        (
            "QOSMaxGRESPerUser",
            "your jobs already use the most GPUs (GRES) your QOS allows per user",
            "when your other jobs end",
            False,
        ),
        (
            "AssocGrpCPURunMinutesLimit",
            "running jobs of your account already hold the most CPUs × time",
            "shorter -t",
            False,
        ),
        ("QOSGrpGRESMinutes", "your QOS has used up its GPUs (GRES) × time budget", "administrator", False),
        (
            "QOSMaxCpuPerJobLimit",
            "asks for more CPUs per job than your QOS allows",
            "sacctmgr show qos",
            True,
        ),
        (
            "AssocMaxMemPerNode",
            "asks for more memory on one node than your account allows",
            "ask for less",
            True,
        ),
        ("QOSMaxWallDurationPerJobLimit", "asks for more time than your QOS allows a job", "-t", True),
        ("QOSMinGRES", "asks for less GPUs (GRES) than your QOS requires", "--qos", True),
        (
            "MaxJobsPerAccount",
            "your account already has the most running jobs your QOS allows",
            "your account's other jobs end",
            False,
        ),
        ("QOSMaxSubmitJobPerUserLimit", "you already have the most jobs queued", "cancel one", False),
        (
            "MaxMemoryRunMinsPerUser",
            "your jobs already hold the most memory × running time",
            "shorter -t",
            False,
        ),
        ("JobHeldUser", "held by you", "scontrol release", True),
        ("ReqNodeNotAvail, UnavailableNodes:node[1-2]", "down, drained or reserved", "-x", False),
        ("(Priority)", "waiting in line", "", False),
        ("launch failed requeued held", "launch failed", "scontrol release", True),
    ],
)
def test_reasons_say_what_happened_and_what_helps(reason: str, words: str, hint: str, never: bool) -> None:
    explained = explain_reason(reason)
    assert isinstance(explained, ReasonExplained)
    assert words in explained.words and explained.never is never
    if hint:
        assert hint in explained.hint and plain_reason(reason).endswith(f": {explained.hint}")
    else:  # waiting is all there is to do: no hint, Slurm's word last
        assert explained.hint == "" and plain_reason(reason).endswith(f"{reason.strip('()')})")


def test_a_node_list_keeps_slurms_words_and_an_unknown_reason_is_shown_as_is() -> None:
    text = plain_reason("ReqNodeNotAvail, UnavailableNodes:node1")
    assert "(ReqNodeNotAvail, UnavailableNodes:node1)" in text and text.startswith("a node it needs")
    assert explain_reason("ReqNodeNotAvail, UnavailableNodes:node1").code == "ReqNodeNotAvail"  # type: ignore[union-attr]
    odd = explain_reason("SomethingNew2027")
    assert odd is not None and not odd.known and odd.words == "SomethingNew2027"
    assert plain_reason("SomethingNew2027") == "SomethingNew2027"
    assert explain_reason(None) is None and explain_reason("") is None and explain_reason("(None)") is None


def test_the_rows_the_panel_and_the_sidebar_use_one_table() -> None:
    from slurmlab.server import views
    from slurmlab.widgets import rows

    assert rows.plain_reason is plain_reason
    assert views.explain_reason is explain_reason
