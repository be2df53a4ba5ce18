"""Expected errors as one line with the fix, never a traceback (``%load_ext slurmlab`` installs it).

IPython shows a traceback for every exception a cell raises but ``UsageError``; slurmlab's own errors
(``a.mig()`` on a node without MIG, a controller that does not answer) say what happened and what to do, so a
20-line traceback only hides that line. :func:`install` registers an IPython custom exception handler
(``shell.set_custom_exc``) for :class:`~slurmlab.errors.SlurmlabError`, for :class:`StepInterrupted` (Ctrl-C in
``%srun``) and for :class:`NotConfiguredUsage` (a magic that found no Slurm, which offers the sandbox picker
under its message). ``%slurm debug on`` (or ``%xmode Verbose``) brings the full traceback back. A handler
another extension set before stays in place for the exceptions it was set for.

This module is loaded by ``%load_ext`` and imports no other module of the magics: what the handler needs of
the kernel (whether ``%slurm debug`` is on, how to start the sandbox) comes in as callbacks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from IPython.core.error import UsageError

from slurmlab.errors import SlurmlabError, SlurmNotConfiguredError

__all__ = [
    "DEBUG_HINT",
    "NotConfiguredUsage",
    "StepInterrupted",
    "install",
    "offer_sandbox",
    "show",
    "uninstall",
]

DEBUG_HINT = "full traceback: %slurm debug on"


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C ended a step (or the wait for an allocation); the allocation lives on. Shown as its one line."""


class NotConfiguredUsage(UsageError):
    """A magic found no Slurm to talk to: its message, then (with ipywidgets) the sandbox picker."""


_OURS: tuple[type[BaseException], ...] = (SlurmlabError, StepInterrupted, NotConfiguredUsage)
# per shell: (the exception classes and handler it had before install), to chain to and to restore
_previous: dict[int, tuple[tuple[type[BaseException], ...], Any]] = {}


def install(shell: Any, *, debug: Callable[[], bool], offer: Callable[[], object]) -> None:
    """Register the one-line handler on ``shell`` (again on a second load: never stacked twice).

    ``debug`` says whether ``%slurm debug on`` asked for full tracebacks; ``offer`` shows the sandbox picker
    under the message of a magic that found no Slurm."""
    if id(shell) in _previous:
        return
    before = tuple(getattr(shell, "custom_exceptions", ()) or ())
    old_handler = getattr(shell, "CustomTB", None) if before else None
    _previous[id(shell)] = (before, old_handler)
    others = tuple(e for e in before if e not in _OURS)
    shell.set_custom_exc(_OURS + others, _make_handler(old_handler, others, debug, offer))


def uninstall(shell: Any) -> None:
    """Put back what the shell had before :func:`install`."""
    saved = _previous.pop(id(shell), None)
    if saved is None:
        return
    before, old_handler = saved
    if before and old_handler is not None:
        shell.CustomTB, shell.custom_exceptions = old_handler, before
    else:
        shell.set_custom_exc((), None)


Handler = Callable[..., Any]


def _make_handler(
    old_handler: Handler | None,
    others: tuple[type[BaseException], ...],
    debug: Callable[[], bool],
    offer: Callable[[], object],
) -> Handler:
    def handler(
        shell: Any,
        etype: type[BaseException],
        value: BaseException,
        tb: TracebackType | None,
        tb_offset: int | None = None,
    ) -> list[str]:
        if old_handler is not None and others and isinstance(value, others) and not isinstance(value, _OURS):
            return list(old_handler(etype, value, tb, tb_offset) or [])
        if debug() or getattr(getattr(shell, "InteractiveTB", None), "mode", "") == "Verbose":
            shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
            return []
        print(one_line(value), file=sys.stderr, flush=True)
        if isinstance(value, (NotConfiguredUsage, SlurmNotConfiguredError)):
            offer()
        return []

    return handler


def one_line(value: BaseException) -> str:
    """What a user sees instead of the traceback."""
    if isinstance(value, StepInterrupted):
        return str(value)
    if isinstance(value, UsageError):  # as IPython shows its UsageError
        return f"UsageError: {value}"
    return f"{type(value).__name__}: {value}  ({DEBUG_HINT})"


def offer_sandbox(start: Callable[[str], str]) -> Any:
    """Display the sandbox picker (a profile and a Start button) when ipywidgets is there; return it, or None.

    Start calls ``start(profile)``: the kernel's ``%slurm sandbox up --profile NAME``."""
    try:
        import ipywidgets  # noqa: F401  (the picker is a widget: nothing to offer without it)

        from slurmlab.widgets.sandbox_picker import SandboxPicker
    except ImportError:
        return None
    picker = SandboxPicker(start)
    show(picker)  # the picker, not its bare widget: a saved notebook keeps its readable snapshot
    return picker.widget


def show(obj: object, *, raw: bool = False) -> None:
    """IPython's ``display``, typed (IPython's own is not)."""
    from IPython import display as ipd

    display: Callable[..., object] = ipd.display
    display(obj, raw=raw)
