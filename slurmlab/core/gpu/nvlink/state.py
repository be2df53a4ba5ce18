"""The state of each NVLink of a GPU, as ``nvidia-smi nvlink -s`` reports it, judged against the model's speed.

A link is *inactive* when nvlink -s says so (or reports 0 GB/s) and *slow* when it runs below the model's
per-link speed (:data:`~slurmlab.core.gpu.nvlink.NVLINK_MODELS`); both are the marks of a GPU that was badly
reseated or of a failing cable/switch tray, and both cut that GPU's NVLink bandwidth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmlab.core.gpu.nvlink.models import nvlink_model_for

if TYPE_CHECKING:
    from slurmlab.core.gpu.smi.nvlink import NvlinkStatus

__all__ = ["GpuLinkState", "SLOW_TOLERANCE", "link_state_lines", "link_states"]

# nvidia-smi prints a link's speed rounded to 3 decimals; anything more than 2 % under the model's speed is slow
SLOW_TOLERANCE = 0.02


@dataclass(frozen=True)
class GpuLinkState:
    """One GPU's links: (link, GB/s as reported or None when inactive), and the speed each should run at."""

    gpu: int
    model: str
    uuid: str
    links: tuple[tuple[int, float | None], ...]
    expected_gbps: float | None  # per link: the model's speed, else the fastest link of the capture

    @property
    def total(self) -> int:
        return len(self.links)

    @property
    def inactive(self) -> tuple[int, ...]:
        return tuple(n for n, v in self.links if not v)

    @property
    def slow(self) -> tuple[tuple[int, float], ...]:
        if self.expected_gbps is None:
            return ()
        floor = self.expected_gbps * (1 - SLOW_TOLERANCE)
        return tuple((n, v) for n, v in self.links if v and v < floor)

    @property
    def active(self) -> int:
        return self.total - len(self.inactive)

    @property
    def healthy(self) -> bool:
        return not self.inactive and not self.slow

    def fault_label(self) -> str | None:
        """A short label for the figure, e.g. ``2 of 18 links inactive``; None when every link is fine."""
        parts = []
        if self.inactive:
            parts.append(f"{len(self.inactive)} of {self.total} links inactive")
        if self.slow:
            parts.append(f"{len(self.slow)} of {self.total} links slow")
        return ", ".join(parts) or None

    def detail(self) -> str:
        """Which links are at fault and how, in words."""
        out = []
        if self.inactive:
            out.append(f"inactive: link {_numbers(self.inactive)}")
        if self.slow:
            want = f"{self.expected_gbps:g}"
            out.append(
                "slow: "
                + ", ".join(f"link {n} at {v:g} GB/s" for n, v in self.slow)
                + f" (expected {want} GB/s)"
            )
        return "; ".join(out)


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(map(str, values))


def link_states(statuses: Sequence[NvlinkStatus]) -> tuple[GpuLinkState, ...]:
    """Judge each GPU's links of a parsed ``nvidia-smi nvlink -s``: the model's per-link speed is the yardstick;
    for a model slurmlab does not know, the fastest link in the capture is."""
    fastest = max((v for s in statuses for _, v in s.links if v), default=None)
    out = []
    for s in statuses:
        row = nvlink_model_for(s.model)
        out.append(
            GpuLinkState(s.gpu, s.model, s.uuid, tuple(s.links), row.reported_gbps if row else fastest)
        )
    return tuple(out)


def link_state_lines(states: Sequence[GpuLinkState]) -> list[str]:
    """The summary lines about link state: one line when all is well, one per faulty GPU otherwise."""
    if not states:
        return []
    lines = ["NVLink link state (nvidia-smi nvlink -s):"]
    healthy = [s for s in states if s.healthy]
    if healthy:
        speeds = sorted({v for s in healthy for _, v in s.links if v})
        speed = " / ".join(f"{v:g}" for v in speeds) or "?"
        counts = sorted({s.total for s in healthy})
        lines.append(
            f"  GPU {_numbers([s.gpu for s in healthy])}: all {' / '.join(map(str, counts))} links "
            f"active at {speed} GB/s"
        )
    for s in states:
        if s.healthy:
            continue
        lines.append(
            f"  GPU{s.gpu}: {s.fault_label()} ({s.detail()}) — fewer or slower links cut its NVLink "
            "bandwidth; reseat the GPU or check its NVLink cables/baseboard (`nvidia-smi nvlink -e` "
            "shows error counters)"
        )
    return lines
