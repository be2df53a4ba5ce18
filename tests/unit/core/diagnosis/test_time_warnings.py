"""When a running allocation's time left is worth a warning (10 % of the limit, 5 minutes), each level once, and
Slurm's --signal=[B:]SIG[@TIME] in words."""

from __future__ import annotations

import pytest

from slurmlab.core.diagnosis.time_warnings import crossed, explain_signal, time_warning


@pytest.mark.parametrize(
    ("left", "limit", "level"),
    [
        (3600, 7200, None),  # half left
        (721, 7200, None),  # just over a tenth
        (720, 7200, "tenth"),  # a tenth of two hours
        (600, 7200, "tenth"),
        (300, 7200, "five-minutes"),
        (0, 7200, "five-minutes"),
        (-5, 7200, "five-minutes"),  # a poll after the limit: never a negative time in words
        (400, 3000, None),  # 400 s is over a tenth (300 s) and over five minutes
        (290, 3000, "five-minutes"),
        (200, 600, "five-minutes"),  # a short job: five minutes comes before a tenth
    ],
)
def test_levels(left: float, limit: float, level: str | None) -> None:
    got = time_warning(left, limit)
    assert (got.level if got else None) == level


def test_no_limit_or_no_time_left_warns_nothing() -> None:
    assert time_warning(None, 3600) is None and time_warning(10, None) is None and time_warning(10, 0) is None


def test_the_message_says_the_time_left_in_words() -> None:
    tenth = time_warning(600, 7200)
    five = time_warning(125, 7200)
    assert tenth is not None and "10 minutes left" in tenth.message and "2 hours limit" in tenth.message
    assert five is not None and "2 minutes 5 seconds left" in five.message and "\n" not in five.message
    gone = time_warning(0, 7200)
    assert gone is not None and "under a second left" in gone.message


def test_each_level_is_announced_once_and_only_upwards() -> None:
    tenth, five = time_warning(600, 7200), time_warning(200, 7200)
    assert crossed(None, tenth) and crossed("tenth", five) and crossed(None, five)
    assert not crossed("tenth", tenth) and not crossed("five-minutes", five)
    assert not crossed("five-minutes", tenth) and not crossed(None, None)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("USR1@120", "SIGUSR1 to the job's steps about 2 minutes"),
        ("B:TERM@300", "SIGTERM to the batch shell only about 5 minutes"),
        ("SIGINT", "SIGINT to the job's steps about 1 minute"),  # Slurm's default: 60 s
        ("10@30", "10 to the job's steps about 30 seconds"),
        ("R:usr2@90", "SIGUSR2 to the job's steps about 1 minute 30 seconds"),
    ],
)
def test_signal_in_words(value: str, words: str) -> None:
    assert words in explain_signal(value)


@pytest.mark.parametrize(
    "value", ["", "USR1@", "@60", "USR1@-5", "USR1@99999", "B:USR1@1m", "USR 1", "x:USR1"]
)
def test_a_bad_signal_says_the_form(value: str) -> None:
    with pytest.raises(ValueError, match=r"\[B:\]SIG\[@TIME\]|65535"):
        explain_signal(value)


@pytest.mark.parametrize(
    ("tokens", "said"),
    [
        (
            ["--gpus=1", "--signal=USR1@120"],
            "--signal=USR1@120: Slurm sends SIGUSR1 to the job's steps about 2 minutes",
        ),
        (["--signal", "B:TERM@300", "-t", "30"], "SIGTERM to the batch shell only about 5 minutes"),
        (["--signal=bad@x"], "is not Slurm's form [B:]SIG[@TIME]"),
        (["--gpus=1", "-t", "30"], ""),
    ],
)
def test_the_request_language_passes_signal_and_the_dry_run_explains_it(tokens: list[str], said: str) -> None:
    from slurmlab.core.diagnosis.time_warnings import signal_note
    from slurmlab.core.request.request import parse_request

    req = parse_request(tokens)
    assert not [w for w in req.warnings if "signal" in w]  # Slurm's own option: passed on, not warned about
    assert [t for t in req.to_argv() if "signal" in t or t == "B:TERM@300"] == [
        t for t in tokens if "signal" in t or t == "B:TERM@300"
    ]
    note = signal_note(req.extra)
    assert (said in note and note.endswith(".")) if said else note == ""
