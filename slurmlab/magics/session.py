"""What the magics of one kernel share: one :class:`Session` per IPython shell, kept on the shell.

The session holds the kernel's allocations (which one is the default, which cell made each), the sandbox
switch (the sandbox in use and what the kernel used before it), the latest step and ``%slurm debug``. A magic
finds it with ``Session.of(self.shell)``; a function called without a shell (a widget's button, a helper)
with ``Session.of()``, the session of the running shell. Without IPython there is no kernel and nothing to
share: ``Session.of()`` is then a new, empty session. A test builds its own with ``Session(shell)``.

``$var`` expansion (decided here, tested in tests/unit/magics, shown in every magic's help): the
magics keep IPython's expansion of the *line*, so ``%salloc --gpus=$n`` asks for ``n`` GPUs and
``{expr}`` works too. IPython's rules, which users meet here: ``$$`` is a literal ``$``; ``$name``
inside single quotes is not expanded (``%srun bash -c 'echo $SLURM_PROCID'`` reaches bash as
written) but ``{expr}`` is; and when any ``$name`` in the line is not a Python variable, IPython
leaves the *whole* line unexpanded. The body of a ``%%srun`` cell is never expanded. Steps run
without a shell: shell variables need ``bash -c '…'``. The magics take their line unexpanded and
expand it themselves (``args.expand_line``, same rules and namespaces) after checking it, since
IPython's expansion of a long line with ``$`` runs for minutes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython import get_ipython
from IPython.core.error import UsageError

from slurmlab.errors import SlurmlabError, SlurmNotConfiguredError
from slurmlab.magics.args import MAX_EXPAND_CHARS
from slurmlab.magics.error_display import NotConfiguredUsage

if TYPE_CHECKING:  # %load_ext imports this module: the Slurm layer and the sandbox load on first use
    from slurmlab.magics.rerun import Origin
    from slurmlab.sandbox.control import Sandbox
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.runner import Runner
    from slurmlab.slurm.steps import StepResult

__all__ = [
    "EXPANSION_HELP",
    "NOT_STARTED_STATES",
    "Before",
    "Session",
    "get_session",
    "has_started",
    "is_live",
    "user_errors",
]

EXPANSION_HELP = (
    "$var: IPython expands $name and {expr} in the line before the magic runs (%salloc --gpus=$n). "
    "$$ is a literal $. $name inside single quotes stays as written (%srun bash -c 'echo $SLURM_PROCID'), "
    "{expr} does not. If any $name is not a Python variable the whole line stays unexpanded. "
    "A %%srun cell body is never expanded. "
    f"A line over {MAX_EXPAND_CHARS:,} characters with $ or {{…}} is refused (IPython's expansion of it "
    "would take minutes)."
)

# an allocation in one of these states has no nodes to run a step on yet: a step there waits for it
NOT_STARTED_STATES = ("SUBMITTING", "PENDING", "CONFIGURING")

# the attribute of the IPython shell that holds its session
SHELL_ATTRIBUTE = "slurmlab_session"


@dataclass
class Before:
    """What this kernel used before ``%slurm sandbox up`` switched it to a sandbox, and whether it started it."""

    runner: Runner
    sandbox: Sandbox | None
    started: bool


class Session:
    """State of the magics in one kernel (one per IPython shell).

    ``default`` (where ``%srun``, ``%gpu_timeslice`` and ``%gpu_isolation`` run without ``--jobid``) is the
    newest *running* allocation, made or attached; only when none runs, the newest pending one. A step sent to
    a pending job waits until it starts, perhaps for hours, while the running one the user has just used sits
    idle: a user who wants the pending one names it with ``--jobid``. One that has ended is never the
    default. ``waiting()`` lists the newer ones passed over, for the line that says so. ``origins`` says which cell made each allocation, so that re-running the cell is noticed.
    The job the kernel itself runs in (``own``) is not among ``allocations``: ``%srun`` runs there only when none
    of them is live, and a bare ``%scancel`` never picks it.
    ``Session(shell)`` becomes the session of ``shell`` (replacing the one it had).
    """

    def __init__(self, shell: Any = None) -> None:
        self.allocations: list[Allocation] = []  # in the order they were made or last attached
        self.origins: dict[int, Origin] = {}  # id(allocation) -> the cell and line that made it
        self.sandbox: Sandbox | None = None  # the sandbox that %slurm sandbox up started or found
        # sandbox folder -> what to return to when it is left or stopped
        self.before: dict[str, Before] = {}
        self.last_step: StepResult | None = None  # what the latest %srun gave
        self.debug = False  # %slurm debug on: full tracebacks instead of one-line errors
        # the job this kernel runs in (JupyterHub's batchspawner, Open OnDemand, salloc), looked for once:
        # an allocation the kernel does not own (kernel.own_allocation), or why the job it names is not taken
        self.own: Allocation | None = None
        self.own_problem: str | None = None
        self.own_checked = False
        # SLURMLAB_USE applied (status.use_environment): a second %load_ext does not log in again
        self.used_environment = False
        if shell is not None:
            self.install(shell)

    @classmethod
    def of(cls, shell: Any = None) -> Session:
        """The session of ``shell`` (default: the running IPython shell), made on first use."""
        if shell is None:
            shell = get_ipython()
            if shell is None:  # no IPython, no kernel: nothing is shared
                return cls()
        found = getattr(shell, SHELL_ATTRIBUTE, None)
        return found if isinstance(found, Session) else cls(shell)

    def install(self, shell: Any) -> None:
        """Make this the session of ``shell``."""
        setattr(shell, SHELL_ATTRIBUTE, self)

    def remember(self, alloc: Allocation, origin: Origin | None = None) -> None:
        """Take ``alloc`` in as the newest allocation (so the default while it lives)."""
        if alloc in self.allocations:
            self.allocations.remove(alloc)
        self.allocations.append(alloc)
        if origin is not None:
            self.origins[id(alloc)] = origin

    def live(self) -> list[Allocation]:
        """This notebook's allocations that are pending or running, newest first."""
        return [a for a in reversed(self.allocations) if is_live(a)]

    @property
    def default(self) -> Allocation | None:
        live = self.live()
        started = [a for a in live if has_started(a)]
        return started[0] if started else (live[0] if live else None)

    @default.setter
    def default(self, alloc: Allocation | None) -> None:
        if alloc is None:  # no default: the live ones stay in the list but none is chosen
            self.allocations[:] = [a for a in self.allocations if not is_live(a)]
        else:
            self.remember(alloc)

    def waiting(self) -> list[Allocation]:
        """The live allocations newer than the default that have not started (passed over for it), newest
        first; empty when the default is the newest live one."""
        live, default = self.live(), self.default
        at = next((i for i, a in enumerate(live) if a is default), 0)
        return live[:at]

    def live_note(self, extra: Sequence[tuple[str, str]] = ()) -> str:
        """``live: 4 (RUNNING), 7 (PENDING): run there with --jobid ID`` for this notebook's live allocations and
        ``extra`` (id, state) pairs; "" when there is none."""
        pairs = [(str(a.job_id), a.state) for a in self.live() if a.job_id is not None]
        pairs += [(j, s) for j, s in extra if j not in {p[0] for p in pairs}]
        if not pairs:
            return ""
        shown = ", ".join(f"{j} ({s})" for j, s in pairs[:6]) + (" …" if len(pairs) > 6 else "")
        return f"live allocations: {shown}: use one with --jobid {pairs[0][0]}"


def is_live(alloc: Allocation) -> bool:
    """Pending or running (or not heard of yet): not ended, not rejected, not forgotten by Slurm, and not
    cancelled by this kernel (its state says RUNNING until the next poll: a step or a reuse must not pick it)."""
    return not alloc.ended and getattr(alloc, "released_at", None) is None


def has_started(alloc: Allocation) -> bool:
    """Live and past pending and configuring: a step sent there runs now."""
    return is_live(alloc) and alloc.state not in NOT_STARTED_STATES


def get_session() -> Session:
    """The session of the running shell: ``Session.of()``."""
    return Session.of()


@contextlib.contextmanager
def user_errors(what: str) -> Iterator[None]:
    """Turn slurmlab's errors into IPython's UsageError: a short message, no traceback.

    No Slurm at all becomes a :class:`~slurmlab.magics.error_display.NotConfiguredUsage`, which the handler
    ``%load_ext slurmlab`` installs shows with the sandbox picker under it."""
    try:
        yield
    except UsageError:
        raise
    except SlurmNotConfiguredError as exc:
        raise NotConfiguredUsage(f"{what}: {exc}") from None
    except SlurmlabError as exc:
        raise UsageError(f"{what}: {exc}") from None
