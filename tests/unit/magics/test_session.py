"""One session per IPython shell (issue 26, point 3): the magics' allocations, sandbox switch and debug flag live
on the shell's :class:`~slurmlab.magics.session.Session`, found with ``Session.of(shell)``, not in module globals."""

from __future__ import annotations

from typing import Any

from slurmlab.magics.session import Session


class _Shell:
    """Just an object to hang a session on, as an InteractiveShell is."""


def test_each_shell_has_its_own_session_made_on_first_use() -> None:
    one, two = _Shell(), _Shell()
    assert Session.of(one) is Session.of(one)
    assert Session.of(one) is not Session.of(two)
    Session.of(one).debug = True
    assert Session.of(two).debug is False


def test_building_a_session_for_a_shell_replaces_the_one_it_had() -> None:
    shell = _Shell()
    before = Session.of(shell)
    fresh = Session(shell)
    assert Session.of(shell) is fresh and fresh is not before
    before.install(shell)
    assert Session.of(shell) is before


def test_the_magics_use_the_session_of_their_shell(ip: Any) -> None:
    mine = Session.of(ip)
    other = Session(ip)  # a new session for the shell: the magics now change this one, not the old one
    try:
        status = ip.run_line_magic("slurm", "debug on")
        assert "full tracebacks on" in str(status)
        assert other.debug is True and mine.debug is False
    finally:
        ip.run_line_magic("slurm", "debug off")
        mine.install(ip)
