"""``slurmlab topo --nvlink FILE``: each NVLink's state from a saved ``nvidia-smi nvlink -s``, joined to the
topology; and ``slurmlab topo nvlink-s.txt`` alone, which reports the links without a topology to draw.

    slurmlab topo topo-m.txt --nvlink nvlink-s.txt [--html out.html]
    slurmlab topo nvlink-s.txt
"""

from __future__ import annotations

import argparse
from typing import Any

from slurmlab.core.gpu.nvlink import link_state_lines, link_states
from slurmlab.core.gpu.smi.nvlink import read_nvlink_status
from slurmlab.core.gpu.smi.sniff import sniff
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError

__all__ = ["add_nvlink_arg", "apply_nvlink", "topology_source"]


def add_nvlink_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nvlink",
        metavar="FILE",
        help="saved `nvidia-smi nvlink -s` of the same node: inactive or slow links show in the "
        "summary and the figure",
    )


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise ParseError("nvlink -s file", path, hint=f"cannot read it: {exc.strerror}") from None


def topology_source(source: tuple[str, str], args: argparse.Namespace) -> tuple[str, str] | None:
    """The (text, where) to read the topology from; None when FILE is ``nvidia-smi nvlink -s`` alone, whose link
    report is then printed here.

    FILE and ``--nvlink`` given the other way round are swapped back (their kinds tell them apart)."""
    text, where = source
    if sniff(text) != "nvlink-s":
        return source
    if args.nvlink:
        other = _read(args.nvlink)
        if sniff(other) == "nvlink-s":
            raise RequestError(
                "both FILE and --nvlink are `nvidia-smi nvlink -s` output",
                hint="FILE is the `nvidia-smi topo -m` capture: slurmlab topo topo-m.txt "
                "--nvlink nvlink-s.txt",
            )
        swapped = (other, args.nvlink)
        args.nvlink = where
        return swapped
    if args.html or args.png:
        raise RequestError(
            f"nothing to draw from `nvidia-smi nvlink -s` alone ({where}): it lists each GPU's "
            "links, not which GPUs they join",
            hint=f"give the topology too: slurmlab topo topo-m.txt --nvlink {where} --html out.html",
        )
    states = link_states(read_nvlink_status(text, where))
    for s in states:
        print(f"GPU {s.gpu}: {s.model} ({s.uuid}): {s.active} of {s.total} links active")
    for line in link_state_lines(states):
        print(line)
    print(f"for the fabric and the figure: slurmlab topo topo-m.txt --nvlink {where}")
    return None


def apply_nvlink(topo: Topology, args: Any) -> Topology:
    """``topo`` with the link state of ``--nvlink FILE``, when given."""
    if not getattr(args, "nvlink", None):
        return topo
    return topo.with_nvlink_status(read_nvlink_status(_read(args.nvlink), args.nvlink))
