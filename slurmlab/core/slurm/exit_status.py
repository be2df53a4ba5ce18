"""How a job ended (:class:`ExitStatus`), from a raw wait status (22.05 JSON), ``CODE:SIGNAL`` text or the JSON
object of newer layouts."""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.errors import ParseError

__all__ = ["LAST_SIGNAL", "NOT_A_SIGNAL", "ExitStatus", "signal_text"]

# Linux numbers its signals 1-64 (SIGRTMAX is 64). sacct prints the part after ':' as WTERMSIG of the stored
# status, the low 7 bits: Slurm's own marks land there too, above 64 (slurm.h: SIG_OOM 253 -> 0:125), and
# are not signals
LAST_SIGNAL = 64
# Linux's numbering on x86 and ARM (signal(7)), the nodes' own; 32-64 are the real-time signals. A table, not
# the signal module: core reads what a node reported and imports nothing of this process's
_SIGNAL_NAMES = (
    "HUP INT QUIT ILL TRAP ABRT BUS FPE KILL USR1 SEGV USR2 PIPE ALRM TERM STKFLT CHLD CONT STOP TSTP TTIN TTOU "
    "URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS"
).split()
_SLURM_MARKS = {125: "out of memory"}
NOT_A_SIGNAL = (
    f"after ':' sacct prints the signal that ended a process; Linux signals are 1-{LAST_SIGNAL}, so a larger "
    "number there is a status of Slurm's own (125: out of memory), not a signal"
)


@dataclass(frozen=True)
class ExitStatus:
    """How a job ended. ``code`` is the exit code; ``signal`` the signal that killed it (0 = none)."""

    code: int
    signal: int = 0
    status: str | None = None

    @classmethod
    def from_wait_status(cls, raw: int) -> ExitStatus:
        """Slurm 22.05 JSON ``exit_code``: a raw wait(2) status (768 -> code 3; 15 -> signal 15)."""
        if raw < 0:
            raise ParseError("exit status", str(raw), hint="a wait status is never negative")
        sig = raw & 0x7F
        if sig:
            return cls(code=0, signal=sig, status="SIGNALED")
        code = (raw >> 8) & 0xFF
        return cls(code=code, signal=0, status="SUCCESS" if code == 0 else "ERROR")

    @classmethod
    def from_text(cls, text: str) -> ExitStatus:
        """``scontrol`` text ``CODE:SIGNAL`` (``3:0``, ``0:15``)."""
        parts = text.strip().split(":")
        if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 10 for p in parts):
            raise ParseError("exit code", text, hint="expected CODE:SIGNAL such as 3:0")
        code, sig = int(parts[0]), int(parts[1])
        status = "SIGNALED" if sig else ("SUCCESS" if code == 0 else "ERROR")
        return cls(code=code, signal=sig, status=status)

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.signal == 0

    @property
    def signal_words(self) -> str | None:
        """What the part after ':' means (:func:`signal_text`); None when it is 0."""
        return signal_text(self.signal) if self.signal else None

    def to_dict(self) -> JSONObject:
        return {"code": self.code, "signal": self.signal, "status": self.status}


def signal_text(number: int) -> str:
    """The part after ':' of sacct's ExitCode in words: ``signal 9 (SIGKILL)``; above 64 it is no signal but a
    value of Slurm's own (``0:125`` is its out-of-memory mark), said as such (:data:`NOT_A_SIGNAL` says more)."""
    if number in _SLURM_MARKS:
        return f"{_SLURM_MARKS[number]} ({number} after ':', not a signal)"
    if number > LAST_SIGNAL or number < 1:
        return f"Slurm status {number} (not a signal)"
    name = f"SIG{_SIGNAL_NAMES[number - 1]}" if number <= len(_SIGNAL_NAMES) else "a real-time signal"
    return f"signal {number} ({name})"
