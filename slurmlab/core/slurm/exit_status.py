"""How a job ended (:class:`ExitStatus`), from a raw wait status (22.05 JSON), ``CODE:SIGNAL`` text or the JSON
object of newer layouts."""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.errors import ParseError

__all__ = ["ExitStatus"]


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

    def to_dict(self) -> JSONObject:
        return {"code": self.code, "signal": self.signal, "status": self.status}
