"""``%squeue``, ``%sinfo`` and ``%slurm``: what runs where, and which Slurm this kernel talks to."""

from __future__ import annotations

import argparse
import html
import os
import pwd
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from slurmlab.core.palette import WARN
from slurmlab.errors import SlurmlabError
from slurmlab.magics import error_display
from slurmlab.magics.args import (
    argument,
    expand_line,
    job_id_option,
    line_tokens,
    magic_arguments,
    raw_line,
    split_line,
)
from slurmlab.magics.doctor import doctor_magic
from slurmlab.magics.kernel import attach_as_default, read_status, slurm_status
from slurmlab.magics.leftover_buttons import leftover_bundle, leftover_buttons
from slurmlab.magics.sandbox import sandbox_command, start_sandbox, use_conf
from slurmlab.magics.session import EXPANSION_HELP, Session, user_errors
from slurmlab.slurm import identity, queries
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.leftovers import Leftovers, find_leftovers, notebook_key
from slurmlab.slurm.runner import Runner, get_runner, set_runner
from slurmlab.widgets.rows import JOB_COLUMNS, NODE_COLUMNS, Table, job_row, node_row

__all__ = ["NotedTable", "StatusMagics", "StatusText", "problems_note", "status_report"]


def _check_user(user: str) -> None:
    """UsageError unless ``user`` names a Unix user here or is a numeric uid."""
    if user.isascii() and user.isdigit():
        return
    try:
        pwd.getpwnam(user)
    except (KeyError, ValueError):
        shown = user if len(user) <= 40 else user[:40] + "…"
        raise UsageError(
            f"-u {shown!r}: no Unix user of that name on this machine; give a name that "
            "`id NAME` knows, a numeric uid, or --all"
        ) from None


def use_ssh(
    args: list[str], lease: str | None = None, python: str | None = None, *, status: bool = True
) -> str:
    """``%slurm use ssh://[user@]host[:port] [/remote/slurm.conf] [--lease DURATION] [--python PATH]``: log in
    once (a passphrase, password or one-time code is asked for here, without echo) and run every Slurm command of
    this kernel there. ``lease``: how long the link may stay down before the cluster releases the allocations this
    kernel holds there (:func:`slurmlab.slurm.ssh.lease.parse_lease`; default 30 minutes). ``python``: the
    nodes' Python with slurmlab, which experiments and Python steps run (default: ``SLURMLAB_NODE_PYTHON``, else
    ``python3`` there). The logins read ``SLURMLAB_SSH_CONFIG`` in place of ``~/.ssh/config`` when it is set.
    ``status``: the new Slurm's status after the line (its queries cost the controller a few RPCs)."""
    from slurmlab.slurm.ssh import SshLink
    from slurmlab.slurm.ssh.lease import DEFAULT_LEASE, parse_lease

    if len(args) not in (1, 2):
        raise UsageError(
            "give one address: %slurm use ssh://user@login.example (then, optionally, the slurm.conf there)"
        )
    try:  # before any login: a typo costs no password prompt
        seconds = DEFAULT_LEASE if lease is None else parse_lease(lease)
    except ValueError as exc:
        raise UsageError(f"--lease: {exc}") from None
    config = os.environ.get("SLURMLAB_SSH_CONFIG", "").strip() or None
    if config is not None and not os.path.isfile(config):
        raise UsageError(
            f"SLURMLAB_SSH_CONFIG names {config}, which is not a file: name an ssh_config or unset it"
        )
    with user_errors("cannot use this ssh:// address"):  # not repeated: it may hold a password
        link = SshLink.to(args[0], lease=seconds, config=config)
    with user_errors(f"cannot use {link.target.url()}"):
        link.connect()
    conf = args[1] if len(args) == 2 else None
    old = set_runner(Runner(ssh=link, slurm_conf=conf, node_python=python))
    Session.of().sandbox = None
    if old.ssh is not None and old.ssh != link:
        old.ssh.disconnect()
    return (
        f"now using Slurm on {link.target.url()} (one SSH connection; nothing on the cluster is touched if it "
        "drops)\n" + (slurm_status() if status else "")
    )


def _not_taken(words: list[str], option: str | None) -> str:
    """What ``%slurm`` says of words its parser left over. Its positionals are taken before the first option, so
    a word after ``--lease DURATION`` or ``--python PATH`` is left over: then it says to put the options last."""
    said = f"%slurm does not take {' '.join(words)!r}"
    if option is None:
        return f"{said}; see %slurm?"
    return (
        f"{said} there: put --lease and --python last (%slurm use ssh://user@login.example /remote/slurm.conf "
        "--lease 45)"
    )


def _use(
    action: str, args: list[str], lease: str | None, python: str | None = None, *, status: bool = True
) -> StatusText:
    """``%slurm use`` of a slurm.conf or an ssh:// address; ``--lease`` only with the latter."""
    if action != "use" and lease is None:
        raise UsageError(
            "--python goes with %slurm use: the nodes' Python of that Slurm (%slurm use ssh://user@login.example "
            "--python /shared/env/bin/python)"
        )
    over_ssh = action == "use" and bool(args) and args[0].startswith("ssh://")
    if over_ssh:
        return StatusText(use_ssh(args, lease, python, status=status))
    if lease is not None:
        raise UsageError(
            "--lease goes with %slurm use ssh://user@login.example: how long that link may stay down "
            "before the cluster releases this kernel's allocations"
        )
    return StatusText(use_conf(args, python, status=status))


def use_environment() -> str | None:
    """``SLURMLAB_USE``, applied as ``%slurm use`` would (``%load_ext slurmlab`` does, once per kernel): the
    words it takes, ``ssh://user@login.example [/remote/slurm.conf]`` or a slurm.conf path, so that a kernel
    (every lesson of the course among them) drives that Slurm unchanged; ``SLURMLAB_NODE_PYTHON`` names the
    nodes' Python. What it did, in words; None when it is unset or this kernel already uses a Slurm of its own
    choosing."""
    words = os.environ.get("SLURMLAB_USE", "").split()
    if not words or Session.of().used_environment:
        return None
    Session.of().used_environment = True
    if len(words) > 2:
        raise UsageError(
            f"SLURMLAB_USE holds {len(words)} words: give an ssh:// address and, optionally, the slurm.conf "
            "there (SLURMLAB_USE='ssh://user@login.example /etc/slurm/slurm.conf'), or one slurm.conf path"
        )
    # the line only: the lesson's next cell (%slurm sandbox up --if-needed) asks for the status, once
    said = _use("use", words, None, status=False)
    return f"SLURMLAB_USE: {said.strip()}"


def status_report(*, leftovers: bool = True, session: Session | None = None) -> StatusText:
    """What ``%slurm`` shows: which Slurm the kernel uses (:func:`~slurmlab.magics.kernel.slurm_status`), then
    (with ``leftovers``) the jobs earlier kernels of this notebook left, with Attach/Cancel buttons under the
    text where ipywidgets is installed."""
    session = session or Session.of()
    status = read_status(session)
    left = _leftovers(status.runner, status.lines, session) if leftovers and status.answers else None
    return StatusText("\n".join(status.lines), leftovers=left, no_slurm=status.no_slurm, own=status.own)


def _leftovers(runner: Runner, lines: list[str], session: Session) -> Leftovers | None:
    """The jobs earlier kernels of this notebook left, added to ``lines``; None when there are none."""
    mine = [str(a.job_id) for a in session.allocations if a.job_id is not None]
    try:
        left = find_leftovers(runner, notebook=notebook_key(), exclude=mine)
    except SlurmlabError as exc:
        lines.append(f"could not look for jobs left by earlier kernels: {exc.message}")
        return None
    if not left:
        return None
    lines.append(f"jobs left by earlier kernels of this notebook ({len(left)}), still holding resources:")
    lines += ["  " + row for row in left.text().splitlines()]
    return left


def problems_note(listing: Any, what: str) -> str:
    """One line for the records a listing could not read (a hostile job name, say), or ""."""
    problems = list(getattr(listing, "problems", ()) or ())
    if not problems:
        return ""
    shown = "; ".join(_short(getattr(p, "message", None) or str(p)) for p in problems[:2])
    more = f" (and {len(problems) - 2} more)" if len(problems) > 2 else ""
    return f"{len(problems)} {what} record(s) could not be read: {shown}{more}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class NotedTable(Table):
    """A Table with a line under it saying what it could not show."""

    def __init__(
        self, rows: Any, columns: Any, *, title: str = "", empty: str = "(nothing)", note: str = ""
    ) -> None:
        super().__init__(rows, columns, title=title, empty=empty)
        self.note = note

    def text(self) -> str:
        return super().text() + (f"\nwarning: {self.note}" if self.note else "")

    def html(self) -> str:
        if not self.note:
            return super().html()
        return (
            super().html()
            + f"<div class='slurmlab-note' style='color:{WARN}'>warning: {html.escape(self.note)}</div>"
        )


class StatusText(str):
    """Text that shows as-is in a notebook (not as a quoted string); with ``leftovers``, an Attach and a Cancel
    button for each of them follow it where ipywidgets is installed."""

    leftovers: Leftovers | None = None
    no_slurm = False  # no Slurm configured here: the sandbox picker follows the text
    own: Allocation | None = None  # the job this kernel runs in: its live panel comes first

    def __new__(
        cls,
        text: str,
        *,
        leftovers: Leftovers | None = None,
        no_slurm: bool = False,
        own: Allocation | None = None,
    ) -> StatusText:
        obj = super().__new__(cls, text)
        obj.leftovers = leftovers
        obj.no_slurm = no_slurm
        obj.own = own
        return obj

    def __repr__(self) -> str:
        return str(self)

    def _ipython_display_(self) -> None:
        if self.own is not None:
            # the session's own job first, as the panel of any allocation shows (the text keeps its line)
            from slurmlab.widgets.panel import display_bundle  # ipywidgets, only where a panel is shown

            panel = display_bundle(self.own)
            if panel is not None:
                error_display.show(panel, raw=True)
        error_display.show({"text/plain": str(self)}, raw=True)
        if self.no_slurm:
            error_display.offer_sandbox(start_sandbox)
        if self.leftovers:
            buttons = leftover_buttons(self.leftovers)
            if buttons is not None:
                error_display.show(leftover_bundle(buttons, self.leftovers), raw=True)


@magics_class
class StatusMagics(Magics):
    @magic_arguments()
    @argument("--all", "-a", action="store_true", help="everyone's jobs (default: only mine)")
    @argument("--user", "-u", metavar="USER", help="jobs of this user")
    @argument(
        "--watch",
        "-w",
        action="store_true",
        help="a live table that refreshes by itself, sortable, mine/all (ipywidgets)",
    )
    @raw_line
    @line_magic
    def squeue(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """The queue with GPU columns: GPU indices per node, shards, state, why it waits, time left.

        ``%squeue`` shows my jobs, ``%squeue --all`` everyone's, ``%squeue -u alice`` one user's;
        ``%squeue --watch`` a live monitor.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "squeue", line)
        if rest or command:
            raise UsageError(f"%squeue does not take {' '.join(rest + command)!r}: use --all or -u USER")
        if ns.watch:
            if ns.user:
                raise UsageError("--watch shows mine or all users' jobs (switch in the widget); drop -u")
            from slurmlab.widgets.queue import QueueMonitor

            return QueueMonitor(all_users=ns.all)
        if ns.user is not None:
            _check_user(ns.user)
        # no -u: the queries decide who "I" am, by effective uid, as every ownership check does
        # ($USER and getpass come from the environment, which anyone can set)
        user = None if ns.all else ns.user
        with user_errors("cannot read the queue"):
            jobs = queries.list_jobs(get_runner(), user=user, all_users=ns.all)
        title = "all jobs" if ns.all else f"jobs of {user or identity.current_user()}"
        return NotedTable(
            [job_row(j) for j in jobs],
            JOB_COLUMNS,
            title=title,
            empty="(no jobs)",
            note=problems_note(jobs, "job"),
        )

    @magic_arguments()
    @argument("--partition", "-p", metavar="NAME", help="only nodes of this partition")
    @raw_line
    @line_magic
    def sinfo(self, line: str, local_ns: dict[str, Any] | None = None) -> NotedTable:
        """Nodes with their GPUs: type, used/total, which indices are in use, shards used per GPU, state."""
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "sinfo", line)
        if rest or command:
            raise UsageError(f"%sinfo does not take {' '.join(rest + command)!r}: use -p PARTITION")
        with user_errors("cannot read the nodes"):
            listing = queries.list_nodes(get_runner())
        note = problems_note(listing, "node")
        nodes = list(listing)
        if ns.partition is not None:
            nodes = [n for n in nodes if ns.partition in n.partitions]
            if not nodes:
                raise UsageError(f"no node in partition {ns.partition!r}: see all nodes with %sinfo")
        return NotedTable(
            [node_row(n) for n in nodes], NODE_COLUMNS, title="nodes", empty="(no nodes)", note=note
        )

    @magic_arguments()
    @argument(
        "action",
        nargs="?",
        choices=["status", "sandbox", "use", "attach", "debug", "doctor"],
        default="status",
        help="status (default); sandbox up|down|status [PROFILE]; "
        "use SLURM_CONF | ssh://USER@HOST [--lease DURATION]; attach JOBID; debug on|off; "
        "doctor [--job ID] [--node NAME] [--json]",
    )
    @argument(
        "args",
        nargs="*",
        help="sandbox: up|down|status and a profile; use: a slurm.conf path, or an ssh:// address and the "
        "slurm.conf there; attach: a job id; debug: on|off",
    )
    @argument("--nodes", type=int, metavar="N", help="sandbox up: number of nodes")
    @argument("--dir", metavar="PATH", help="sandbox: its folder (default: the profile's usual place)")
    @argument(
        "--profile", metavar="PROFILE", help="sandbox: the hardware profile, as `slurmlab sandbox` spells it"
    )
    @argument(
        "--if-needed",
        action="store_true",
        help="sandbox up: use the Slurm configured here if it answers; start the sandbox only if none is",
    )
    @argument(
        "--accounting",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="sandbox up: Slurm accounting (sacct) on or off; default: on where slurmdbd and MariaDB are",
    )
    @argument(
        "--lease",
        metavar="DURATION",
        help="use ssh://…: how long the link may stay down before the cluster releases the allocations this "
        "kernel holds there, as salloc -t takes a time (45 = minutes, 2:00:00, 1-00); default 30 minutes",
    )
    @argument(
        "--python",
        metavar="PATH",
        help="use: the nodes' Python with slurmlab installed, which experiments and Python steps run "
        "(default: SLURMLAB_NODE_PYTHON; else this kernel's Python, over SSH python3 there)",
    )
    @raw_line
    @line_magic
    def slurm(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """Which Slurm this kernel talks to; jobs earlier kernels of this notebook left; switch Slurm.

        ``%slurm`` status (with the jobs earlier kernels of this notebook left, to attach or cancel) ·
        ``%slurm attach JOBID`` follow a job and make it the default allocation ·
        ``%slurm sandbox up [PROFILE | --profile P] [--nodes N] [--dir PATH]`` start (or reuse) a real
        local Slurm and use it (``--if-needed``: only when no Slurm answers here) · ``%slurm sandbox down`` ·
        ``%slurm sandbox leave`` back to the Slurm used before (stops the sandbox if this kernel started it) ·
        ``%slurm sandbox status`` ·
        ``%slurm use /path/slurm.conf`` · ``%slurm use ssh://user@login.example[:port] [/remote/slurm.conf]
        [--lease DURATION] [--python PATH]`` Slurm on another machine, over one SSH connection (prompts asked here,
        without echo; ``SLURMLAB_SSH_CONFIG`` an ssh_config in place of ``~/.ssh/config``); ``--python``: the
        nodes' Python with slurmlab, for the experiments and Python steps;
        ``--lease``: if the link stays down that long (as ``salloc -t`` writes a time: ``45`` minutes,
        ``2:00:00``; default 30 minutes), the cluster releases the allocations this kernel made there after it ·
        ``%slurm debug on|off`` full tracebacks instead of one-line errors ·
        ``%slurm doctor [--job ID] [--node NAME] [--json]`` what is wrong with the cluster, a job or a node.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "slurm", line)
        if ns.action == "doctor" and not command:
            # its own tokens, in the order given: %slurm's parser would move a value (`--job 4`) among its
            # positionals on Python 3.12+ (parse_known_args takes intermixed positionals there)
            tokens = line_tokens(line)
            at = tokens.index("doctor")
            return doctor_magic(tokens[:at] + tokens[at + 1 :])
        if rest or command:
            raise UsageError(_not_taken(rest + command, ns.lease or ns.python))
        if ns.action == "use" or ns.lease is not None or ns.python is not None:
            return _use(ns.action, ns.args, ns.lease, ns.python)
        if ns.action == "status":
            if ns.args:
                raise UsageError("%slurm status takes no arguments")
            return status_report(session=Session.of(self.shell))
        if ns.action == "attach":
            if len(ns.args) != 1:
                raise UsageError("give one job id: %slurm attach 42 (see yours with %slurm or %squeue)")
            alloc = attach_as_default(job_id_option(ns.args[0], "%slurm attach"), Session.of(self.shell))
            print(f"attached to job {alloc.job_id}: it is the default allocation now (%srun runs there)")
            return alloc
        if ns.action == "debug":
            if ns.args not in (["on"], ["off"]):
                raise UsageError("%slurm debug on (full tracebacks) or %slurm debug off (one-line errors)")
            session = Session.of(self.shell)
            session.debug = ns.args == ["on"]
            return StatusText(
                "full tracebacks on: %slurm debug off for one-line errors"
                if session.debug
                else "one-line errors (full tracebacks: %slurm debug on)"
            )
        args = list(ns.args)
        if ns.profile is not None:
            if len(args) > 1:
                raise UsageError(f"two profiles given ({args[1]!r} and --profile {ns.profile!r}): give one")
            args.append(ns.profile)
        return StatusText(
            sandbox_command(args, ns.nodes, ns.dir, if_needed=ns.if_needed, accounting=ns.accounting)
        )


for _m in (StatusMagics.squeue, StatusMagics.sinfo, StatusMagics.slurm):
    _m.__doc__ = (_m.__doc__ or "") + "\n" + EXPANSION_HELP
