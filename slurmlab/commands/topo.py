"""``slurmlab topo`` and ``slurmlab mig``: read saved nvidia-smi output (or a sandbox hardware profile), print
a readable summary, and optionally write the Bokeh view as standalone HTML or PNG.

    slurmlab topo topo-m.txt [--model "NVIDIA H100 80GB HBM3"] [--best 4] [--html out.html] [--png out.png]
    slurmlab topo --profile dgx-h100 --png build/dgx-h100.png
    slurmlab mig mig-lgi.txt|nvidia-smi-L.txt [--html OUT] [--png OUT]
    slurmlab mig --profile h200-mig --png build/h200-mig.png
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from slurmlab.errors import ParseError, RequestError


def register(subparsers: Any) -> None:
    t = subparsers.add_parser(
        "topo",
        help="show a GPU topology from `nvidia-smi topo -m` output or a sandbox hardware profile",
        description="Parse saved `nvidia-smi topo -m` output (or load a sandbox hardware profile), print the "
        "GPUs, NUMA groups and links, and optionally write the topology view as HTML or PNG.",
    )
    _source_args(t)
    t.add_argument("--model", help="GPU model name for NVLink bandwidths (e.g. 'NVIDIA H100 80GB HBM3')")
    t.add_argument("--best", type=int, metavar="N", help="also choose the best-connected N GPUs and say why")
    t.add_argument("--highlight", metavar="GPUS", help="GPU indices to highlight, e.g. 0,1,2,3")
    t.add_argument("--pcie", action="store_true", help="draw PCIe relations between GPUs too")
    _output_args(t)
    t.set_defaults(func=handle_topo)

    m = subparsers.add_parser(
        "mig",
        help="show MIG instances from `nvidia-smi mig -lgi`, `-L`, a `-cgi` log or a hardware profile",
        description="Parse saved MIG output (`nvidia-smi mig -lgi`, `nvidia-smi -L`, a `mig -cgi -C` log; "
        "`-lgip`/`-lgipp` print their tables) or a sandbox profile's MIG layout; optionally write the view.",
    )
    _source_args(m)
    m.add_argument("--model", help="GPU model name when the capture does not say (e.g. 'A100-40GB')")
    _output_args(m)
    m.set_defaults(func=handle_mig)


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="a file of nvidia-smi output, or - for standard input")
    p.add_argument("--profile", metavar="NAME", help="a sandbox hardware profile (see `slurmlab sandbox`)")


def _output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="OUT", help="write the view as a standalone HTML page (no internet needed)")
    p.add_argument("--png", metavar="OUT", help="write the view as PNG (needs chromium)")


def _source(args: argparse.Namespace) -> tuple[str, str] | None:
    """(text, where) of the FILE argument (stdin for ``-``), or None when --profile names the source."""
    if args.file and args.profile:
        raise RequestError("give either FILE or --profile, not both")
    if args.profile:
        return None
    if not args.file:
        raise RequestError("give a FILE of nvidia-smi output (or - for stdin) or --profile NAME")
    if args.file == "-":
        return sys.stdin.read(), "standard input"
    try:
        with open(args.file, encoding="utf-8", errors="replace") as fh:
            return fh.read(), args.file
    except OSError as exc:
        raise ParseError("input file", args.file, hint=f"cannot read it: {exc.strerror}") from None


def _indices(text: str | None) -> list[int]:
    if not text:
        return []
    from slurmlab.core.gpu.topology import parse_cpu_list

    return sorted(parse_cpu_list(text, what="GPU list"))


def _write(fig: Any, args: argparse.Namespace) -> None:
    if not (args.html or args.png):
        return
    from slurmlab.viz.export import export_png, save_html

    if args.html:
        print(f"wrote {save_html(fig, args.html)}")
    if args.png:
        print(f"wrote {export_png(fig, args.png)}")


def _show_warnings(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)


def handle_topo(args: argparse.Namespace) -> int:
    # the library's own loaders: the CLI reads exactly what slurmlab.topology_from_file/_profile read
    from slurmlab.core.gpu.captures import topology_from_text
    from slurmlab.core.gpu.placement import best_gpus
    from slurmlab.slurm.hardware_files import topology_from_profile

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = _source(args)
        if source is None:
            topo = topology_from_profile(args.profile).topology
            if args.model:
                topo = topo.with_model(args.model)
        else:
            topo = topology_from_text(*source, model=args.model).topology
    _show_warnings(caught)
    print(topo.summary())
    if args.best:
        print(best_gpus(topo, args.best).explain())
    highlight = _indices(args.highlight)
    if args.best and not highlight:
        highlight = list(best_gpus(topo, args.best).gpus)
    if args.html or args.png:
        from slurmlab.viz.topology_view import topology_figure

        _write(topology_figure(topo, highlight_gpus=highlight, show_pcie=args.pcie), args)
    return 0


def handle_mig(args: argparse.Namespace) -> int:
    from slurmlab.core.gpu.captures import read_mig_capture
    from slurmlab.core.gpu.mig import MigLayout
    from slurmlab.slurm.hardware_files import mig_from_profile

    layout: MigLayout | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = _source(args)
        if source is None:
            layout = mig_from_profile(args.profile).layout
        else:
            capture = read_mig_capture(*source, model=args.model)
            layout = capture.layout
            for line in capture.lines():
                print(line)
    _show_warnings(caught)
    if layout is not None:
        print(layout.summary())
        if args.html or args.png:
            from slurmlab.viz.mig_view import mig_figure

            _write(mig_figure(layout), args)
    elif args.html or args.png:
        print("nothing to draw: this output has no MIG instances (use -lgi, -L or a -cgi log)", file=sys.stderr)
    return 0
