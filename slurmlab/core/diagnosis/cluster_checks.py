"""The doctor's cluster checks as judgement: the controller's ping, the GRES configuration, one node's state.

Checks (ids): ``controller`` slurmctld answers (``scontrol ping``, one line per controller); ``config.gres``
GresTypes vs the nodes' Gres and GPUs Slurm found fewer of than configured; ``node`` a drained or down node,
with Slurm's reason and who set it when. Every check that needs the controller SKIPs with "controller down"
when it does not answer (:func:`skipped_for_controller`), instead of failing each on its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.slurm.models import Node

__all__ = [
    "CONTROLLER_DOWN",
    "ControllerLine",
    "judge_config",
    "judge_controller",
    "judge_munge",
    "judge_node",
    "judge_nodes",
    "parse_ping",
    "parse_reasons",
    "skipped_for_controller",
    "split_reason",
    "unhealthy",
]

CONTROLLER_DOWN = "controller down: not checked (see the controller check)"
_SANDBOX_FIX = "on a slurmlab sandbox: `slurmlab sandbox up` (or `%slurm sandbox up`) starts it again"
_DOWN_FIX = (
    "ask the admins to start slurmctld (`sudo systemctl start slurmctld`; its log says why it stopped); "
    + _SANDBOX_FIX
)
# `scontrol ping`: "Slurmctld(primary) at HOST is UP" (22.05 .. 26.05), one line per controller
_PING_LINE = re.compile(r"Slurmctld\((?P<role>[^)]*)\)\s+at\s+(?P<host>\S+)\s+is\s+(?P<state>[A-Z]+)")
# node states that mean it takes no (new) work
_BAD_STATES = (
    "DOWN",
    "DRAIN",
    "DRAINED",
    "DRAINING",
    "FAIL",
    "FAILING",
    "INVAL",
    "NOT_RESPONDING",
    "NO_RESPOND",
    "UNKNOWN",
    "REBOOT_REQUESTED",
    "POWERED_DOWN",
    "MAINTENANCE",
)
# the reason slurmctld gives a node whose slurmd found fewer GPUs than slurm.conf says
_COUNT_LOW = re.compile(r"gres/(\w+) count (?:reported )?(?:lower|too low)", re.IGNORECASE)
_WHO_WHEN = re.compile(r"^(?P<text>.*?)\s*\[(?P<who>[^@\]\s]+)@(?P<when>[^\]]+)\]\s*$", re.DOTALL)


@dataclass(frozen=True)
class ControllerLine:
    role: str  # primary, backup1 ...
    host: str
    state: str  # UP / DOWN


def parse_ping(text: str) -> list[ControllerLine]:
    """The controllers ``scontrol ping`` names; lines it does not recognise are left out (the caller shows the
    whole answer when none is recognised)."""
    return [ControllerLine(m["role"], m["host"], m["state"]) for m in _PING_LINE.finditer(text)]


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_controller(answer: str, *, error: str = "") -> Finding:
    """``answer``: what ``scontrol ping`` printed; ``error``: why it could not run (a timeout, no Slurm)."""
    title = "controller reachable"
    lines = parse_ping(answer)
    details = tuple(f"{c.role} at {c.host}: {c.state}" for c in lines)
    if error:
        return Finding(
            "controller", title, Verdict.FAIL, f"`scontrol ping` did not answer: {_clip(error)}", _DOWN_FIX
        )
    up = [c for c in lines if c.state == "UP"]
    if not lines:
        return Finding(
            "controller",
            title,
            Verdict.FAIL,
            f"`scontrol ping` named no controller: {_clip(answer) or 'it printed nothing'}",
            _DOWN_FIX,
        )
    if not up:
        return Finding(
            "controller", title, Verdict.FAIL, "no controller answers: " + "; ".join(details), _DOWN_FIX
        )
    if len(up) < len(lines):
        down = ", ".join(f"{c.role} at {c.host}" for c in lines if c.state != "UP")
        return Finding(
            "controller",
            title,
            Verdict.WARN,
            f"{up[0].role} at {up[0].host} answers; {down} is down (no failover left)",
            "ask the admins to start the stopped slurmctld",
            details=details,
        )
    return Finding("controller", title, Verdict.OK, f"{up[0].role} at {up[0].host} is UP", details=details)


def judge_munge(message: str, hint: str = "") -> Finding:
    """The controller could not be asked because munge (Slurm's authentication) does not work."""
    return Finding(
        "controller",
        "controller reachable",
        Verdict.FAIL,
        f"munge (Slurm's authentication) does not work, so no Slurm command gets an answer: {_clip(message)}",
        hint or "ask the admins to start munged (`sudo systemctl start munge`); " + _SANDBOX_FIX,
    )


def skipped_for_controller(check: str, title: str, subject: str = "") -> Finding:
    return Finding(check, title, Verdict.SKIP, CONTROLLER_DOWN, subject=subject)


def _gres_names(nodes: Sequence[Node]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in nodes:
        for g in n.gres:
            out.setdefault(g.name, []).append(n.name)
    return out


def judge_config(gres_types: Sequence[str], nodes: Sequence[Node]) -> Finding:
    """GresTypes (``scontrol show config``) against the nodes' Gres, and nodes Slurm found short of GPUs."""
    title = "GRES configuration"
    declared = {t.strip() for t in gres_types if t.strip()}
    on_nodes = _gres_names(nodes)
    problems = [
        f"{name} on {', '.join(sorted(hosts)[:5])}{' …' if len(hosts) > 5 else ''} but not in GresTypes"
        for name, hosts in sorted(on_nodes.items())
        if name not in declared
    ]
    short = [f"{n.name}: {_clip(n.reason or '')}" for n in nodes if n.reason and _COUNT_LOW.search(n.reason)]
    unused = sorted(declared - set(on_nodes))
    notes = (f"declared in GresTypes but on no node: {', '.join(unused)} (harmless)",) if unused else ()
    said = f"GresTypes={','.join(sorted(declared)) or '(none)'}; {len(nodes)} node(s)"
    if problems:
        return Finding(
            "config.gres",
            title,
            Verdict.FAIL,
            said + ": a node has GRES the cluster does not declare",
            "ask the admins to add it to GresTypes in slurm.conf (then `scontrol reconfigure`)",
            details=tuple(problems) + notes,
        )
    if short:
        return Finding(
            "config.gres",
            title,
            Verdict.FAIL,
            f"{len(short)} node(s) found fewer GPUs than slurm.conf says (Slurm drains them)",
            "ask the admins to compare gres.conf with `nvidia-smi -L` on the node (a GPU fell off the "
            "bus, or the count in slurm.conf is wrong), then resume it",
            details=tuple(short) + notes,
        )
    gpus = sum(n.gpu_total for n in nodes)
    return Finding(
        "config.gres",
        title,
        Verdict.OK,
        said + f", {gpus} GPU(s) configured, every node's GRES declared",
        details=notes,
    )


def parse_reasons(text: str) -> dict[str, tuple[str, str, str]]:
    """``sinfo -R -N -h -o '%N|%u|%H|%E'`` -> node -> (reason, who set it, when). The reason comes last and may
    hold ``|`` itself; a line without the three separators is left out."""
    out: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines():
        parts = line.split("|", 3)
        if len(parts) == 4 and parts[0].strip():
            node, who, when, reason = (p.strip() for p in parts)
            out[node] = (
                reason,
                "" if who in ("", "N/A", "Unknown") else who,
                "" if when in ("", "N/A", "Unknown") else when,
            )
    return out


def split_reason(reason: str | None) -> tuple[str, str, str]:
    """(Slurm's reason, who set it, when) from ``bad fan [root@2026-12-01T07:52:21]``; "" where unknown."""
    if not reason:
        return "", "", ""
    m = _WHO_WHEN.match(reason.strip())
    if m is None:
        return reason.strip(), "", ""
    return m["text"].strip(), m["who"], m["when"].strip()


def unhealthy(node: Node) -> list[str]:
    """The states of ``node`` that keep work off it (its base state and flags, as Slurm spells them)."""
    words = [node.state.upper(), *(f.upper() for f in node.state_flags)]
    return [w for w in words if w.rstrip("*") in _BAD_STATES or w.endswith("*")]


def judge_node(node: Node, *, named: bool = True, reason: tuple[str, str, str] | None = None) -> Finding:
    """One node: OK when it takes work; FAIL (named with --node) or WARN (found in a partition) when drained or
    down, with Slurm's reason, who set it and when (``reason``: from ``sinfo -R``, see :func:`parse_reasons`;
    else read from the node record, where 22.05's text has them), and the fix."""
    state = "+".join([node.state, *node.state_flags])
    bad = unhealthy(node)
    subject = "node " + node.name
    if not bad:
        return Finding("node", "node state", Verdict.OK, f"{state}: takes jobs", subject=subject)
    text, who, when = reason if reason is not None and reason[0] else split_reason(node.reason)
    said = f"{state}" + (f": {text}" if text else ": no reason given")
    if who:
        said += f" (set by {who} at {when})"
    drained = any(w.startswith("DRAIN") for w in bad)
    admin = (
        f"admins: `scontrol update nodename={node.name} state=resume` once it is fixed"
        if drained or "DOWN" in bad
        else f"admins: look at slurmd on {node.name} (`systemctl status slurmd`)"
    )
    fix = f"{admin}; everyone else: use another node or partition (`%sinfo` shows which take jobs)"
    return Finding("node", "node state", Verdict.FAIL if named else Verdict.WARN, said, fix, subject)


def judge_nodes(
    nodes: Sequence[Node],
    where: str = "the cluster",
    reasons: Mapping[str, tuple[str, str, str]] | None = None,
) -> list[Finding]:
    """Every drained or down node among ``nodes`` (a WARN each), or one OK saying all take jobs."""
    bad = [judge_node(n, named=False, reason=(reasons or {}).get(n.name)) for n in nodes if unhealthy(n)]
    if bad:
        return bad
    return [Finding("node", "node state", Verdict.OK, f"all {len(nodes)} node(s) of {where} take jobs")]
