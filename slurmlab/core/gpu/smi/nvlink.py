"""Parsers of ``nvidia-smi nvlink -s`` (link speeds) and ``nvlink -c`` (link capabilities)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmlab.core.gpu.smi._text import GPU_LINE as _GPU_LINE
from slurmlab.core.gpu.smi._text import nonblank_lines as _nonblank_lines
from slurmlab.core.gpu.smi.sniff import sniff
from slurmlab.errors import ParseError

__all__ = ["NvlinkStatus", "parse_nvlink_capabilities", "parse_nvlink_status", "read_nvlink_status"]


@dataclass(frozen=True)
class NvlinkStatus:
    gpu: int
    model: str
    uuid: str
    links: tuple[tuple[int, float | None], ...]  # (link, GB/s as reported) ; None = inactive
    capabilities: tuple[tuple[int, str, bool], ...] = ()

    @property
    def active_links(self) -> int:
        return sum(1 for _, v in self.links if v is not None)

    @property
    def total_gbps(self) -> float:
        return sum(v for _, v in self.links if v is not None)


def _gpu_blocks(text: str, what: str) -> list[tuple[re.Match[str], list[str]]]:
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for s in _nonblank_lines(text):
        m = _GPU_LINE.match(s)
        if m:
            blocks.append((m, []))
        elif not blocks:
            raise ParseError(
                what, s, hint="expected the output to start with 'GPU <n>: <name> (UUID: GPU-...)'"
            )
        else:
            blocks[-1][1].append(s)
    if not blocks:
        raise ParseError(what, text, hint="no 'GPU <n>: ...' line found")
    return blocks


def parse_nvlink_status(text: str) -> list[NvlinkStatus]:
    """``nvidia-smi nvlink -s`` (``--status``): per GPU, the speed of each link."""
    out = []
    for m, body in _gpu_blocks(text, "nvidia-smi nvlink -s output"):
        links: list[tuple[int, float | None]] = []
        for s in body:
            lm = re.match(r"^Link (\d+): (?:([\d.]+) GB/s|<inactive>|Inactive)$", s)
            if lm is None:
                raise ParseError(
                    "nvidia-smi nvlink -s line",
                    s,
                    hint="expected 'Link <n>: <speed> GB/s' or 'Link <n>: <inactive>'",
                )
            # a link that trained at 0 GB/s carries nothing: it is as down as an <inactive> one
            speed = float(lm.group(2)) if lm.group(2) else None
            links.append((int(lm.group(1)), speed or None))
        out.append(NvlinkStatus(int(m.group(1)), m.group(2), m.group(3), tuple(links)))
    return out


def read_nvlink_status(text: str, where: str) -> list[NvlinkStatus]:
    """Saved ``nvidia-smi nvlink -s`` output; other output is refused saying what it looks like."""
    kind = sniff(text)
    if kind != "nvlink-s":
        raise ParseError(
            "nvidia-smi nvlink -s output",
            text[:120],
            hint=f"{where} looks like `{kind}` output; the link state comes from "
            "`nvidia-smi nvlink -s` (each link's speed or <inactive>)",
        )
    return parse_nvlink_status(text)


def parse_nvlink_capabilities(text: str) -> list[NvlinkStatus]:
    """``nvidia-smi nvlink -c``: per GPU and link, each capability true/false."""
    out = []
    for m, body in _gpu_blocks(text, "nvidia-smi nvlink -c output"):
        caps: list[tuple[int, str, bool]] = []
        for s in body:
            cm = re.match(r"^Link (\d+), (.+?): (true|false)$", s)
            if cm is None:
                raise ParseError(
                    "nvidia-smi nvlink -c line", s, hint="expected 'Link <n>, <capability>: true|false'"
                )
            caps.append((int(cm.group(1)), cm.group(2), cm.group(3) == "true"))
        out.append(NvlinkStatus(int(m.group(1)), m.group(2), m.group(3), (), tuple(caps)))
    return out
