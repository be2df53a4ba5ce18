"""``slurmlab workshop`` (issue 31 point 1): wrong input is refused in words before anything is made, and down
of a folder without a class removes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurmlab.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--seats", "0"], "1 to 200 seats"),
        (["--seats", "3", "--prefix", "Bad Name"], "would not make Unix user names"),
        (["--seats", "3", "--gpu-cap", "-2"], "--gpu-cap"),
        (["--seats", "3", "--profile", "nosuchprofile"], "nosuchprofile"),
        (["--seats", "3", "--view-every", "1"], "cannot ask Slurm every 1 s: give 5 to 3600"),
        (["--seats", "3", "--view-every", "nan"], "cannot ask Slurm every nan s"),
    ],
)
def test_up_refuses_wrong_input_in_words_and_makes_nothing(
    extra: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "class"
    code, text = _run(["workshop", "up", "--dir", str(folder), *extra], capsys)
    assert code == 2 and said in text and "Traceback" not in text
    assert not folder.exists()


def test_up_refuses_form_settings_it_cannot_read_or_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "settings.json"
    for content, said in (
        (b"\xff\xfe{", "cannot read the form settings"),
        (b"[1]", "not a JSON object"),
        (b'{"ngpus": {"value": "many"}}', "whole number"),
    ):
        bad.write_bytes(content)
        code, text = _run(
            [
                "workshop",
                "up",
                "--seats",
                "2",
                "--profile",
                "seed",
                "--settings",
                str(bad),
                "--dir",
                str(tmp_path / "c"),
            ],
            capsys,
        )
        assert code == 2 and said in text and "Traceback" not in text
    assert not (tmp_path / "c").exists()


def test_up_without_root_says_it_needs_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, text = _run(
        ["workshop", "up", "--seats", "2", "--profile", "seed", "--dir", str(tmp_path / "c")], capsys
    )
    assert code == 2 and "needs root" in text and "sudo slurmlab workshop up" in text
    assert not (tmp_path / "c").exists()


def test_a_folder_that_is_not_empty_is_never_taken_as_a_workshops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the check comes after the root check")
    (tmp_path / "someones.txt").write_text("keep me")
    code, text = _run(["workshop", "up", "--seats", "2", "--profile", "seed", "--dir", str(tmp_path)], capsys)
    assert code == 2 and "is not empty" in text
    assert (tmp_path / "someones.txt").read_text() == "keep me"


def test_down_and_status_of_a_folder_without_a_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = _run(["workshop", "down", "--dir", str(tmp_path)], capsys)
    assert code == 0 and "nothing to remove" in text
    assert tmp_path.exists()
    code, text = _run(["workshop", "status", "--dir", str(tmp_path)], capsys)
    assert code == 2 and f"no workshop in {tmp_path}" in text


def test_status_lists_the_class_from_one_squeue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``workshop status`` asks the controller once for the class (issue 27's budget): the teacher's view's squeue
    of the class, not the detailed listing (on 22.05 a version, the nodes, every job's record and their owners).
    The recorded cluster is scripted too, so the detailed listing would have had all it asks for."""
    import json

    from slurmlab.testing import FakeRunner
    from slurmlab.workshop import Workshop
    from slurmlab.workshop.control import STATE_FILE
    from slurmlab.workshop.room import ROOM_QUEUE_ARGV

    seats = [{"name": f"student0{i}", "uid": 2000 + i} for i in (1, 2, 3)]
    (tmp_path / STATE_FILE).write_text(json.dumps({"seats": seats, "gpu_cap": 1}), encoding="utf-8")
    fake = FakeRunner()
    fake.replay_cluster("22.05")
    room = (Path(__file__).parent / "data" / "room_squeue_2205.txt").read_text(encoding="utf-8")
    fake.on(list(ROOM_QUEUE_ARGV), stdout=room.replace("student02", "someoneelse", 1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Workshop, "sandbox", lambda self: object())  # running, as far as status can tell
        mp.setattr(Workshop, "runner", lambda self: fake)
        mp.setattr(Workshop, "hub", lambda self: None)
        code, text = _run(["workshop", "status", "--dir", str(tmp_path)], capsys)
    assert code == 0, text
    assert fake.history == [list(ROOM_QUEUE_ARGV)], fake.history
    lines = [line.strip() for line in text.splitlines() if line.startswith("  ")]
    assert lines[0].startswith("student03: job 7 PENDING (QOSMaxGRESPerUser): ")
    assert [line.split(" (")[0] for line in lines[1:]] == [
        "student01: job 4 RUNNING",
        "student03: job 6 RUNNING",
        "student03: job 3 RUNNING",
        "student02: job 2 RUNNING",
        "student01: job 1 RUNNING",
    ]  # job 5 is another user's: not the class's
