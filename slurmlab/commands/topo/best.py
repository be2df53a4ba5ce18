"""``slurmlab topo … --best N [--node NAME] [--taken GPUS]``: the best-connected N GPUs of a node, among the free
ones, what the taken ones cost, and the salloc line that comes closest to asking for them.

    slurmlab topo topo-m.txt --best 4 --node gpu17     # which GPUs gpu17 has free: asks Slurm (scontrol -d)
    slurmlab topo topo-m.txt --best 4 --taken 0,2,3    # the same, told by hand
    slurmlab topo --node node1 --best 4                # in a slurmlab sandbox: its own topology of node1
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from typing import Any

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.errors import RequestError

__all__ = ["add_best_args", "best_report", "check_best_args", "node_only_topology"]


def add_best_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--best", type=int, metavar="N", help="also choose the best-connected N GPUs and say why")
    p.add_argument(
        "--node",
        metavar="NAME",
        help="with --best: choose among the GPUs Slurm has free on NAME "
        "(scontrol show node -d); without FILE or --profile, a sandbox node's own topology",
    )
    p.add_argument("--taken", metavar="GPUS", help="with --best: GPUs other jobs hold, e.g. 0,2-3")


def check_best_args(args: argparse.Namespace) -> None:
    """--node and --taken only mean something for --best: say so rather than ignore them."""
    if args.best is None and (args.node or args.taken):
        flag = "--node" if args.node else "--taken"
        raise RequestError(
            f"{flag} says which GPUs are taken, for --best N; it does nothing alone",
            hint=f"add --best N (e.g. --best 2 {flag} {args.node or args.taken})",
        )
    if args.best is not None and args.best < 1:
        raise RequestError(f"--best {args.best}: choose at least 1 GPU", hint="e.g. --best 2")


def node_only_topology(args: argparse.Namespace, runner: Any = None) -> Any:
    """With ``--node NAME`` and neither FILE nor --profile: NAME's NodeTopology as the sandbox the runner talks
    to records it (a real cluster's topology is known only from a capture). None otherwise."""
    if not args.node or args.file or args.profile:
        return None
    from slurmlab.slurm import hardware_files
    from slurmlab.slurm.runner import get_runner

    node = args.node
    hw = hardware_files.sandbox_hardware(runner or get_runner())
    if hw is None:
        raise RequestError(
            f"the topology of {node} is not known here: give its saved `nvidia-smi topo -m` as FILE",
            hint=f"on the cluster: srun -w {node} --gpus=1 nvidia-smi topo -m > topo.txt; then "
            f"slurmlab topo topo.txt --best N --node {node}",
        )
    found = hw.node_topology(node)
    return dataclasses.replace(found, topology=found.topology.with_model(args.model)) if args.model else found


def best_report(
    topo: Any, args: argparse.Namespace, node_topo: Any = None, runner: Any = None
) -> tuple[str, Any]:
    """(the text to print, the choice) for ``--best N``; asks Slurm which GPUs are taken when --node is given.

    ``node_topo``: the NodeTopology the topology came from, when it maps Slurm's IDX to its GPU indices."""
    from slurmlab.commands.topo.command import _indices
    from slurmlab.core.gpu.placement import best_gpus, salloc_advice, taken_on_node
    from slurmlab.core.request.pipeline import read_request
    from slurmlab.slurm.allocation import salloc_argv

    if node_topo is None and args.profile:
        from slurmlab.slurm.hardware_files import topology

        node_topo = topology(profile=args.profile)  # for Slurm's GPU type of the profile (h100)
    lines: list[str] = []
    split = _mig_split_gpus(args, runner)
    whole = [g.index for g in topo.gpus if g.index not in split]
    taken = set(_indices(args.taken))
    known_free = bool(taken)
    gpu_type = getattr(node_topo, "gpu_type", None)
    if args.node:
        from slurmlab.core.gpu.mig import is_mig_type
        from slurmlab.slurm.node_queries import show_node

        node = show_node(args.node, runner)
        if node is None:
            raise RequestError(f"Slurm has no node {args.node!r}", hint="`sinfo -N` lists the nodes")
        held = taken_on_node(node, getattr(node_topo, "idx_to_gpu", None))
        lines.append(held.line())
        lines += [f"  note: {note}" for note in held.notes]
        mig_types = any(is_mig_type(t) for t in node.gpu_types() if t)  # MIG slices count as GPUs there
        if node.gpu_total and not mig_types and node.gpu_total != len(topo.gpus):
            print(
                f"warning: Slurm counts {node.gpu_total} GPUs on {node.name} but the topology shows "
                f"{len(topo.gpus)}: is it {node.name}'s?",
                file=sys.stderr,
            )
        taken |= set(held.gpus)
        known_free = True
        types = [t for t in node.gpu_types() if t and not is_mig_type(t)]
        gpu_type = types[0] if len(types) == 1 else gpu_type
    if split:
        lines.append(
            f"GPUs {format_cpu_list(split)} are split into MIG instances: left out (a MIG slice is asked "
            "for by its profile, e.g. --gres=gpu:3g.40gb:1)"
        )
    choice = best_gpus(topo, args.best, available=whole if split else None, taken=taken & set(whole))
    free = len(whole) - len(choice.taken) if known_free else None
    where = f"{args.node}'s free GPUs" if args.node else ("the free GPUs" if taken else "the GPUs")
    lines.append(f"best {args.best} of {where}: {choice.explain()}")
    advice = salloc_advice(topo, choice, node=args.node, gpu_type=gpu_type, free=free)
    line = shlex.join(salloc_argv(read_request(list(advice.options)).to_argv()))
    lines.append(f"ask Slurm: {line}")
    lines += [f"  - {note}" for note in advice.notes]
    return "\n".join(lines), choice


def _mig_split_gpus(args: argparse.Namespace, runner: Any = None) -> set[int]:
    """GPUs split into MIG instances, where the source says (a profile, a sandbox node); a capture of ``topo -m``
    does not, so there every GPU counts as whole."""
    from slurmlab.slurm import hardware_files

    try:
        if args.profile:
            layout = hardware_files.mig(profile=args.profile).layout
        elif args.node and not args.file:
            from slurmlab.slurm.runner import get_runner

            hw = hardware_files.sandbox_hardware(runner or get_runner())
            if hw is None:
                return set()
            layout = hw.node_mig(args.node).layout
        else:
            return set()
    except RequestError:
        return set()  # no MIG instances on this hardware
    return {g.index for g in layout.gpus}
