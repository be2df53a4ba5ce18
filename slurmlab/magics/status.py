"""``%squeue``, ``%sinfo`` and ``%slurm``: what runs where, and which Slurm this kernel talks to."""

from __future__ import annotations

import os
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from slurmlab.magics.args import argument, expand_line, magic_arguments, raw_line, split_line
from slurmlab.magics.session import EXPANSION_HELP, get_session, user_errors
from slurmlab.widgets.rows import JOB_COLUMNS, NODE_COLUMNS, Table, job_row, node_row

__all__ = ["NotedTable", "StatusMagics", "problems_note", "slurm_status"]


def _check_user(user: str) -> None:
    """UsageError unless ``user`` names a Unix user here or is a numeric uid."""
    import pwd

    if user.isascii() and user.isdigit():
        return
    try:
        pwd.getpwnam(user)
    except (KeyError, ValueError):
        shown = user if len(user) <= 40 else user[:40] + "…"
        raise UsageError(f"-u {shown!r}: no Unix user of that name on this machine; give a name that "
                         "`id NAME` knows, a numeric uid, or --all") from None


def slurm_status() -> str:
    """Which Slurm this kernel uses, whether it answers, and the notebook's allocations."""
    from slurmlab.slurm import queries
    from slurmlab.slurm.runner import get_runner

    runner = get_runner()
    session = get_session()
    conf = runner.slurm_conf or os.environ.get("SLURM_CONF") or "Slurm's default (/etc/slurm/slurm.conf)"
    lines = [f"Slurm config: {conf}" + (f", cluster {runner.cluster}" if runner.cluster else "")]
    if session.sandbox is not None:
        lines.append(f"sandbox: {session.sandbox.profile_name} ({len(session.sandbox.nodes)} nodes) "
                     f"in {session.sandbox.directory}")
    answer = queries.ping(runner)
    if answer.get("ok"):
        lines.append(f"controller: answering (Slurm {answer.get('version')})")
    else:
        lines.append(f"controller: NOT answering — {answer.get('message')}")
    if session.allocations:
        lines.append("allocations of this notebook:")
        lines += [f"  {a.summary()}" + ("  (default for %srun)" if a is session.default else "")
                  for a in session.allocations]
    else:
        lines.append("no allocation yet: %salloc --gpus=1")
    return "\n".join(lines)


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

    def __init__(self, rows: Any, columns: Any, *, title: str = "", empty: str = "(nothing)",
                 note: str = "") -> None:
        super().__init__(rows, columns, title=title, empty=empty)
        self.note = note

    def text(self) -> str:
        return super().text() + (f"\nwarning: {self.note}" if self.note else "")

    def html(self) -> str:
        import html

        if not self.note:
            return super().html()
        return super().html() + f"<div class='slurmlab-note' style='color:#a66'>warning: {html.escape(self.note)}</div>"


class StatusText(str):
    """Text that shows as-is in a notebook (not as a quoted string)."""

    def __repr__(self) -> str:
        return str(self)


@magics_class
class StatusMagics(Magics):
    @magic_arguments()
    @argument("--all", "-a", action="store_true", help="everyone's jobs (default: only mine)")
    @argument("--user", "-u", metavar="USER", help="jobs of this user")
    @argument("--watch", "-w", action="store_true",
              help="a live table that refreshes by itself, sortable, mine/all (ipywidgets)")
    @raw_line
    @line_magic
    def squeue(self, line: str, local_ns: dict[str, Any] | None = None) -> Any:
        """The queue with GPU columns: GPU indices per node, shards, state, why it waits, time left.

        ``%squeue`` shows my jobs, ``%squeue --all`` everyone's, ``%squeue -u alice`` one user's;
        ``%squeue --watch`` a live monitor.
        """
        from slurmlab.slurm import identity, queries
        from slurmlab.slurm.runner import get_runner

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
        return NotedTable([job_row(j) for j in jobs], JOB_COLUMNS, title=title, empty="(no jobs)",
                          note=problems_note(jobs, "job"))

    @magic_arguments()
    @argument("--partition", "-p", metavar="NAME", help="only nodes of this partition")
    @raw_line
    @line_magic
    def sinfo(self, line: str, local_ns: dict[str, Any] | None = None) -> NotedTable:
        """Nodes with their GPUs: type, used/total, which indices are in use, shards used per GPU, state."""
        from slurmlab.slurm import queries
        from slurmlab.slurm.runner import get_runner

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
        return NotedTable([node_row(n) for n in nodes], NODE_COLUMNS, title="nodes", empty="(no nodes)",
                          note=note)

    @magic_arguments()
    @argument("action", nargs="?", choices=["status", "sandbox", "use"], default="status",
              help="status (default); sandbox up|down|status [PROFILE]; use SLURM_CONF")
    @argument("args", nargs="*", help="for sandbox: up|down|status and a profile; for use: a slurm.conf path")
    @argument("--nodes", type=int, metavar="N", help="sandbox up: number of nodes")
    @argument("--dir", metavar="PATH", help="sandbox: its folder (default: the profile's usual place)")
    @argument("--profile", metavar="PROFILE", help="sandbox: the hardware profile, as `slurmlab sandbox` spells it")
    @raw_line
    @line_magic
    def slurm(self, line: str, local_ns: dict[str, Any] | None = None) -> StatusText:
        """Which Slurm this kernel talks to; switch to a local sandbox or another slurm.conf.

        ``%slurm`` status · ``%slurm sandbox up [PROFILE | --profile P] [--nodes N] [--dir PATH]`` start (or reuse) a real
        local Slurm and use it · ``%slurm sandbox down`` · ``%slurm sandbox status`` ·
        ``%slurm use /path/slurm.conf``.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "slurm", line)
        if rest or command:
            raise UsageError(f"%slurm does not take {' '.join(rest + command)!r}; see %slurm?")
        if ns.action == "status":
            if ns.args:
                raise UsageError("%slurm status takes no arguments")
            return StatusText(slurm_status())
        if ns.action == "use":
            return StatusText(self._use(ns.args))
        args = list(ns.args)
        if ns.profile is not None:
            if len(args) > 1:
                raise UsageError(f"two profiles given ({args[1]!r} and --profile {ns.profile!r}): give one")
            args.append(ns.profile)
        return StatusText(self._sandbox(args, ns.nodes, ns.dir))

    def _use(self, args: list[str]) -> str:
        from slurmlab.slurm.runner import Runner, set_runner

        if len(args) != 1:
            raise UsageError("give one slurm.conf path: %slurm use /etc/slurm/slurm.conf")
        path = os.path.abspath(os.path.expanduser(args[0]))
        if not os.path.isfile(path):
            raise UsageError(f"no slurm.conf at {path}")
        set_runner(Runner(slurm_conf=path))
        get_session().sandbox = None
        return f"now using {path}\n" + slurm_status()

    def _sandbox(self, args: list[str], nodes: int | None, directory: str | None) -> str:
        from slurmlab.sandbox.control import DEFAULT_PROFILE, Sandbox
        from slurmlab.slurm.runner import Runner, set_runner

        if not args or args[0] not in ("up", "down", "status"):
            raise UsageError("%slurm sandbox up|down|status [PROFILE]")
        verb, profile = args[0], (args[1] if len(args) > 1 else None)
        session = get_session()
        with user_errors(f"sandbox {verb} failed"):
            if verb == "up":
                sb = Sandbox.up(profile or DEFAULT_PROFILE, nodes, directory)
                session.sandbox = sb
                set_runner(sb.runner())
                return (f"sandbox {sb.profile_name} {'reused' if sb.reused else 'started'}; this kernel now uses "
                        f"it\n" + slurm_status())
            if directory is not None:
                sb = Sandbox.find(directory)
            elif profile is None and session.sandbox is not None:
                sb = session.sandbox
            else:
                sb = Sandbox.find(profile)
            if verb == "status":
                return str(sb.status())
            if session.sandbox is not None and session.sandbox.directory == sb.directory:
                session.sandbox = None
                set_runner(Runner())
            stopped = sb.down()
            return f"sandbox {sb.profile_name} stopped ({len(stopped)} processes)"


for _m in (StatusMagics.squeue, StatusMagics.sinfo, StatusMagics.slurm):
    _m.__doc__ = (_m.__doc__ or "") + "\n" + EXPANSION_HELP


