"""How two devices of a node connect (:class:`LinkKind`, best first) and one such connection (:class:`Link`), as
``nvidia-smi topo -m`` prints them."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from slurmlab.errors import ParseError

__all__ = ["Link", "LinkKind"]


class LinkKind(enum.Enum):
    """How two devices connect, best first (``topo -m`` legend)."""

    SELF = "X"
    NVLINK = "NV"
    PIX = "PIX"  # at most one PCIe bridge
    PXB = "PXB"  # several PCIe bridges, no host bridge
    PHB = "PHB"  # through a PCIe host bridge (the CPU)
    NODE = "NODE"  # between host bridges inside one NUMA node
    SYS = "SYS"  # across the SMP interconnect between NUMA nodes (old drivers: SOC)

    @property
    def rank(self) -> int:
        """Lower is closer; used to order and compare links."""
        return list(LinkKind).index(self)

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    LinkKind.SELF: "self",
    LinkKind.NVLINK: "bonded set of NVLinks",
    LinkKind.PIX: "PCIe, at most one bridge",
    LinkKind.PXB: "PCIe, several bridges (no host bridge)",
    LinkKind.PHB: "PCIe through a host bridge (CPU)",
    LinkKind.NODE: "PCIe between host bridges in one NUMA node",
    LinkKind.SYS: "PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI)",
}

_LINK_RE = re.compile(r"^(?:(X)|NV(\d{1,3})|(PIX|PXB|PHB|NODE|SYS|SOC))$")


@dataclass(frozen=True)
class Link:
    """The connection between devices ``a`` and ``b`` (names as in the matrix, e.g. ``GPU0``, ``NIC3``)."""

    a: str
    b: str
    kind: LinkKind
    nvlinks: int = 0  # bonded NVLinks when kind is NVLINK
    label: str = ""  # the token as printed (keeps "SOC" of old drivers)

    @classmethod
    def from_token(cls, a: str, b: str, token: str) -> Link:
        """Build a link from a ``topo -m`` cell; an unknown token is a :class:`ParseError`."""
        m = _LINK_RE.match(token)
        if m is None:
            raise ParseError(
                f"topology link between {a} and {b}",
                token,
                hint="expected X, NV<n>, PIX, PXB, PHB, NODE, SYS or SOC (nvidia-smi topo -m legend)",
            )
        if m.group(1):
            return cls(a, b, LinkKind.SELF, 0, token)
        if m.group(2):
            n = int(m.group(2))
            if n < 1:
                raise ParseError(f"topology link between {a} and {b}", token, hint="NV<n> needs n >= 1")
            return cls(a, b, LinkKind.NVLINK, n, token)
        word = m.group(3)
        return cls(a, b, LinkKind.SYS if word == "SOC" else LinkKind(word), 0, token)

    @property
    def is_nvlink(self) -> bool:
        return self.kind is LinkKind.NVLINK

    @property
    def short(self) -> str:
        return f"NV{self.nvlinks}" if self.is_nvlink else self.kind.value

    def other(self, name: str) -> str:
        return self.b if name == self.a else self.a
