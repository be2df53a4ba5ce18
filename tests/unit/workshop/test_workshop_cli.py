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
