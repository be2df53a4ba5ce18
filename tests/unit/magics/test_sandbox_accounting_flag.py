"""``--accounting/--no-accounting`` reach ``Sandbox.up`` from the terminal and from ``%slurm sandbox up``; left out,
the sandbox decides (None: on where slurmdbd and MariaDB are installed)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from slurmlab.errors import SandboxError


def _cli(*argv: str) -> argparse.Namespace:
    from slurmlab.commands import sandbox

    parser = argparse.ArgumentParser()
    sandbox.register(parser.add_subparsers())
    return parser.parse_args(["sandbox", "up", *argv])


def test_the_terminal_flag_is_three_valued() -> None:
    assert _cli().accounting is None
    assert _cli("--accounting").accounting is True
    assert _cli("--no-accounting").accounting is False


@pytest.mark.parametrize(("flag", "want"), [("", None), ("--accounting", True), ("--no-accounting", False)])
def test_the_magic_passes_the_flag_to_sandbox_up(
    ip: Any, monkeypatch: pytest.MonkeyPatch, flag: str, want: bool | None
) -> None:
    from slurmlab.sandbox.control import Sandbox

    seen: dict[str, Any] = {}

    def up(*args: Any, **kwargs: Any) -> Sandbox:
        seen.update(kwargs)
        raise SandboxError("stopped here by the test")

    monkeypatch.setattr(Sandbox, "up", staticmethod(up))
    with pytest.raises(Exception, match="stopped here by the test"):
        ip.run_line_magic("slurm", f"sandbox up seed {flag} --dir /tmp/slurmlab-never-made".strip())
    assert seen["accounting"] is want
