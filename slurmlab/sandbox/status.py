"""What runs of one sandbox, as ``slurmlab sandbox status`` shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SandboxStatus"]


@dataclass(frozen=True)
class SandboxStatus:
    """What runs of one sandbox."""

    directory: Path
    profile: str
    nodes: tuple[str, ...]
    processes: dict[str, tuple[int, bool]]  # name -> (pid, alive); a frozen process is alive
    ports: dict[str, int]
    node_states: dict[str, str] = field(default_factory=dict)
    frozen: frozenset[str] = (
        frozenset()
    )  # names of the processes stopped by a signal (alive, answering nothing)
    release: str = ""  # the Slurm it runs, e.g. 24.11.5
    accounting: str = ""  # "off", or "on (...)" with whether slurmdbd and mariadbd answer; "" not known

    @property
    def running(self) -> bool:
        return bool(self.processes) and all(ok for _, ok in self.processes.values()) and not self.frozen

    @property
    def stopped(self) -> bool:
        return not any(ok for _, ok in self.processes.values())

    @property
    def dead(self) -> tuple[str, ...]:
        """Names of the daemons that are not running."""
        return tuple(name for name, (_, ok) in self.processes.items() if not ok)

    def condition(self, name: str) -> str:
        """``running``, ``FROZEN`` (stopped by a signal: alive but answering nothing) or ``NOT RUNNING``."""
        if name in self.frozen:
            return "FROZEN (stopped by a signal, answers nothing)"
        return "running" if self.processes[name][1] else "NOT RUNNING"

    def __str__(self) -> str:
        word = "running" if self.running else ("stopped" if self.stopped else "PARTLY running")
        slurm = f", Slurm {self.release}" if self.release else ""
        lines = [f"sandbox {self.profile} ({len(self.nodes)} nodes{slurm}) in {self.directory}: {word}"]
        for name, (pid, _) in self.processes.items():
            port = self.ports.get(name)
            where = f" port {port}" if port else ""
            lines.append(f"  {name:<14} pid {pid:<8} {self.condition(name)}{where}")
        for node, st in self.node_states.items():
            note = "  (not responding: its slurmd is dead, frozen or unreachable)" if st.endswith("*") else ""
            lines.append(f"  node {node:<9} {st}{note}")
        if self.accounting:
            lines.append(f"  accounting     {self.accounting}")
        if not self.running and not self.stopped:
            lines.append(
                f"bring back what is dead or frozen, keeping every job: slurmlab sandbox restart --dir {self.directory}"
            )
        return "\n".join(lines)
