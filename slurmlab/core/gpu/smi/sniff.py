"""Telling which ``nvidia-smi`` output a capture is, so that it goes to the right parser."""

from __future__ import annotations

import re

from slurmlab.core.gpu.smi._text import ANSI_RE as _ANSI_RE
from slurmlab.errors import ParseError

__all__ = ["sniff"]


def sniff(text: str) -> str:
    """Which nvidia-smi output this is: topo, topo-c, topo-p2p, nvlink-s, nvlink-c, lgip, lgipp, lgi, lci, cgi,
    list (``-L``) or mig-devices."""
    body = _ANSI_RE.sub("", text)
    if "MIG devices:" in body:
        return "mig-devices"
    if "GPU instance profiles:" in body or re.search(r"\|\s*\d+\s+MIG \S+\s+\d+\s+\d+/\d+", body):
        return "lgip"
    if "GPU instances:" in body:
        return "lgi"
    if "Compute instances:" in body:
        return "lci"
    if re.search(r"Profile ID\s+\d+\s+Placements?", body):
        return "lgipp"
    if "Successfully created" in body:
        return "cgi"
    if "have an affinity with CPU" in body:
        return "topo-c"
    if re.search(r"^\s*Link \d+, ", body, re.M):
        return "nvlink-c"
    if re.search(r"^\s*Link \d+: ", body, re.M):
        return "nvlink-s"
    if re.search(r"^\s*MIG \S+\s+Device\s+\d+:", body, re.M) or re.search(
        r"^\s*GPU \d+: .*\(UUID:", body, re.M
    ):
        return "list"
    if re.search(r"^\s*OK\s+= Status Ok", body, re.M):
        return "topo-p2p"
    if re.search(r"GPU0", body):
        return "topo"
    raise ParseError(
        "nvidia-smi output", text[:200], hint="not a topo/nvlink/mig/-L capture that slurmlab knows"
    )
