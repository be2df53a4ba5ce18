"""``slurmlab topo`` and ``slurmlab mig``: read saved nvidia-smi output (or a sandbox hardware profile), print
a readable summary, and optionally write the Bokeh view as standalone HTML or PNG.

    slurmlab topo topo-m.txt [--model "NVIDIA H100 80GB HBM3"] [--best 4 [--node NAME]] [--html out.html] [--png out.png]
    slurmlab topo topo-m.txt --nvlink nvlink-s.txt [--html out.html]   (nvlink-s.txt alone: its link report)
    slurmlab topo --profile dgx-h100 --png build/dgx-h100.png
    slurmlab mig mig-lgi.txt|nvidia-smi-L.txt|mig-lgip.txt|mig-lgipp.txt [--model M] [--html OUT] [--png OUT]
    slurmlab mig --profile h200-mig --png build/h200-mig.png
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from slurmlab.commands.topo.best import add_best_args, best_report, check_best_args, node_only_topology
from slurmlab.commands.topo.nvlink import add_nvlink_arg, apply_nvlink, topology_source
from slurmlab.errors import ParseError, RequestError

__all__ = ["handle_mig", "handle_topo", "register"]


def register(subparsers: Any) -> None:
    t = subparsers.add_parser(
        "topo",
        help="show a GPU topology from `nvidia-smi topo -m` output or a sandbox hardware profile",
        description="Parse saved `nvidia-smi topo -m` output (or load a sandbox hardware profile), print the "
        "GPUs, NUMA groups and links, and optionally write the topology view as HTML or PNG.",
    )
    _source_args(t)
    t.add_argument("--model", help="GPU model name for NVLink bandwidths (e.g. 'NVIDIA H100 80GB HBM3')")
    add_best_args(t)  # --best N [--node NAME] [--taken GPUS]: commands/topo_best.py
    t.add_argument("--highlight", metavar="GPUS", help="GPU indices to highlight, e.g. 0,1,2,3")
    t.add_argument("--pcie", action="store_true", help="draw PCIe relations between GPUs too")
    add_nvlink_arg(t)  # --nvlink FILE (nvidia-smi nvlink -s): commands/topo/nvlink.py
    _output_args(t)
    t.set_defaults(func=handle_topo)

    m = subparsers.add_parser(
        "mig",
        help="show MIG instances from `nvidia-smi mig -lgi`, `-L`, a `-cgi` log or a hardware profile",
        description="Parse saved MIG output (`nvidia-smi mig -lgi`, `nvidia-smi -L`, a `mig -cgi -C` log) or a "
        "sandbox profile's MIG layout, print it with the room left on each GPU, and optionally write the view; "
        "`-lgip`/`-lgipp` are drawn as the catalogue of what can still be carved.",
    )
    _source_args(m)
    m.add_argument(
        "--model",
        help="GPU model when the capture does not name it (e.g. 'A100-40GB', 'NVIDIA H100 "
        "PCIe'); the summary says which models the profile names fit",
    )
    _output_args(m)
    m.set_defaults(func=handle_mig)


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="a file of nvidia-smi output, or - for standard input")
    p.add_argument("--profile", metavar="NAME", help="a sandbox hardware profile (see `slurmlab sandbox`)")


def _output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html", metavar="OUT", help="write the view as a standalone HTML page (no internet needed)"
    )
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
    from slurmlab.core.gpu.devices import parse_cpu_list

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
        # the readers' own warnings; a ResourceWarning is some other object's garbage collected meanwhile
        if not issubclass(w.category, ResourceWarning):
            print(f"warning: {w.message}", file=sys.stderr)


def handle_topo(args: argparse.Namespace) -> int:
    # the library's own loaders: the CLI reads exactly what slurmlab.topology() reads
    from slurmlab.core.gpu.captures import topology_from_text
    from slurmlab.slurm.hardware_files import topology

    check_best_args(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        node_topo = node_only_topology(args)  # --node NAME alone: a sandbox's own record of NAME
        source = _source(args) if node_topo is None else None
        if node_topo is not None:
            topo = node_topo.topology
        elif source is None:
            topo = topology(profile=args.profile, model=args.model).topology
        else:
            source = topology_source(source, args)  # None: FILE was `nvlink -s` alone, reported there
            if source is None:
                return 0
            topo = topology_from_text(*source, model=args.model).topology
        topo = apply_nvlink(topo, args)
    _show_warnings(caught)
    # the best set first: a --best or --node mistake is told before the summary, not after it
    best = best_report(topo, args, node_topo) if args.best else None
    print(topo.summary())
    highlight = _indices(args.highlight)
    if best is not None:
        print(best[0])
        highlight = highlight or list(best[1].gpus)
    if args.html or args.png:
        from slurmlab.viz.topology_view import topology_figure

        _write(topology_figure(topo, highlight_gpus=highlight, show_pcie=args.pcie), args)
    return 0


def handle_mig(args: argparse.Namespace) -> int:
    from slurmlab.core.gpu import captures
    from slurmlab.core.gpu.mig import MigCatalogue, MigLayout
    from slurmlab.slurm.hardware_files import mig

    layout: MigLayout | None = None
    catalogue: MigCatalogue | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = _source(args)
        if source is None:
            layout = mig(profile=args.profile).layout
        else:
            try:
                capture = captures.read_mig_capture(*source, model=args.model)
            except (ParseError, RequestError):
                raise
            except (
                ValueError,
                IndexError,
                KeyError,
            ) as exc:  # a reader's slip on odd text: an error, no traceback
                raise ParseError(
                    f"MIG output in {source[1]}", str(exc), hint="not a capture slurmlab can read"
                ) from None
            layout = capture.layout
            catalogue = capture.catalogue() if layout is None else None
            for line in capture.lines():
                print(line)
    _show_warnings(caught)
    if layout is not None:
        print(layout.summary())
        if args.html or args.png:
            from slurmlab.viz.mig_view import mig_figure

            _write(mig_figure(layout), args)
    elif catalogue is not None and (args.html or args.png):
        from slurmlab.viz.mig_view import mig_catalogue_figure

        _write(mig_catalogue_figure(catalogue), args)
    elif args.html or args.png:
        print(
            "nothing to draw: `mig -lci` lists compute instances only (use -lgi, -L, a -cgi log, -lgip or -lgipp)",
            file=sys.stderr,
        )
    return 0
