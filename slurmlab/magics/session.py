"""What the magics of one kernel share: the default allocation, the runner in use, errors as UsageError.

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
from collections.abc import Iterator
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from slurmlab.errors import SlurmlabError
from slurmlab.magics.args import MAX_EXPAND_CHARS

if TYPE_CHECKING:  # imported where used: %load_ext must not pull in the sandbox or start the poller
    from slurmlab.sandbox.control import Sandbox
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.steps import StepResult

__all__ = ["EXPANSION_HELP", "Session", "get_session", "user_errors"]

EXPANSION_HELP = (
    "$var: IPython expands $name and {expr} in the line before the magic runs (%salloc --gpus=$n). "
    "$$ is a literal $. $name inside single quotes stays as written (%srun bash -c 'echo $SLURM_PROCID'), "
    "{expr} does not. If any $name is not a Python variable the whole line stays unexpanded. "
    "A %%srun cell body is never expanded. "
    f"A line over {MAX_EXPAND_CHARS:,} characters with $ or {{…}} is refused (IPython's expansion of it "
    "would take minutes)."
)


class Session:
    """State of the magics in one kernel (one per process)."""

    def __init__(self) -> None:
        self.default: Allocation | None = None  # the latest allocation: where %srun runs without --jobid
        self.allocations: list[Allocation] = []
        self.sandbox: Sandbox | None = None  # the sandbox that %slurm sandbox up started or found
        self.last_step: StepResult | None = None  # what the latest %srun gave

    def remember(self, alloc: Allocation) -> None:
        self.default = alloc
        self.allocations.append(alloc)


_session = Session()


def get_session() -> Session:
    return _session


@contextlib.contextmanager
def user_errors(what: str) -> Iterator[None]:
    """Turn slurmlab's errors into IPython's UsageError: a short message, no traceback."""
    try:
        yield
    except UsageError:
        raise
    except SlurmlabError as exc:
        raise UsageError(f"{what}: {exc}") from None
