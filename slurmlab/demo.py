"""`make demo`: the workshop course, executed on a real Slurm sandbox and written as HTML.

    python -m slurmlab.demo [--profile dgx-h100] [--out build/demo] [--lessons 00,03] [--keep] [--dir DIR]

Brings the sandbox up (dgx-h100: 2 nodes x 8 H100, stand-in GPUs), checks it grants a 2-node GPU allocation
with closest binding (one step prints each task's GPUs and CPUs: a broken sandbox fails here in seconds, not in
every lesson), then executes every lesson ``notebooks/NN-*.ipynb`` in order, each in a fresh kernel, and writes
it as HTML under ``build/demo/`` with an ``index.html``. One line per lesson; exit 0 only when every lesson ran
without an error. The sandbox is brought down at the end (unless --keep, or it was already running), Ctrl-C and
failures included; no kernel is left running.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from slurmlab._extras import require
from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.request.explain import explain
from slurmlab.core.request.request import parse_request
from slurmlab.course import Lesson, build_course, discover, parse_selection, select
from slurmlab.errors import SlurmlabError
from slurmlab.sandbox import DEFAULT_PROFILE, Sandbox
from slurmlab.slurm.allocation import Allocation, salloc_argv
from slurmlab.slurm.poller import JobPoller

DEFAULT_OUT = "build/demo"
SALLOC_ARGS = ["-N2", "-n4", "--gpus=4", "--gpu-bind=closest", "--gres-flags=enforce-binding", "-t", "10"]
STEP_ARGS = ["-n4", "--gpus-per-task=1"]
TASK_REPORT = (
    "import os\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "print(os.environ.get('SLURM_PROCID'), os.environ.get('SLURMD_NODENAME'),"
    " os.environ.get('CUDA_VISIBLE_DEVICES', '-'), os.environ.get('SLURM_STEP_GPUS', '-'),"
    " ','.join(map(str, cpus)), sep='|')\n"
)


def preflight(sb: Sandbox) -> None:
    """The 2-node allocation with closest binding and one step: the sandbox gives GPUs the way lessons expect."""
    runner = sb.runner()
    poller = JobPoller(runner)
    try:
        request = parse_request(SALLOC_ARGS)
        print(f"\n$ {' '.join(salloc_argv(SALLOC_ARGS))}")
        print(f"  = {explain(request)}")
        with Allocation.submit(SALLOC_ARGS, runner=runner, poller=poller) as alloc:
            alloc.wait(timeout=60)
            print(f"  granted: job {alloc.job_id}, {alloc.state}")
            job = alloc.job
            print(f"\nallocation of job {alloc.job_id} (scontrol show job -d):")
            if job is not None:
                for a in job.gpu_allocs:
                    gres = ",".join(g.render() for g in a.items)
                    print(f"  Nodes={a.node} CPU_IDs={a.cpu_ids or '-'} Mem={a.mem_mb or '-'} GRES={gres}")
                print(f"  binding: {job.tres_bind or '-'}, enforce-binding: {job.gres_binding_enforced}")
            print(
                f"\n$ srun --jobid={alloc.job_id} --overlap {' '.join(STEP_ARGS)} python3 -c <report GPUs and CPUs>"
            )
            result = alloc.srun(["python3", "-c", TASK_REPORT], args=STEP_ARGS, on_output=lambda *_: None)
            if not result.ok:
                raise SlurmlabError("the step failed: " + " ".join(result.stderr[-3:]))
            rows = sorted(
                (line.split("|") for line in result.stdout if line.count("|") == 4), key=lambda r: int(r[0])
            )
            print(
                f"  {'task':>4}  {'node':<6} {'CUDA_VISIBLE_DEVICES':<21} {'SLURM_STEP_GPUS':<16} CPU affinity"
            )
            for rank, node, cvd, gpus, cpus in rows:
                print(
                    f"  {rank:>4}  {node:<6} {cvd:<21} {gpus:<16} {format_cpu_list(int(c) for c in cpus.split(',') if c)}"
                )
        alloc.wait("ENDED", timeout=30)
        print(f"\nreleased job {alloc.job_id} (scancel): {alloc.state}")
    finally:
        poller.stop()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m slurmlab.demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build the workshop course: start the Slurm sandbox, execute every lesson\n"
        "(notebooks/NN-*.ipynb) in order, each in a fresh kernel, write each as HTML with an\n"
        "index.html (build/demo/ by default), stop the sandbox. Exit 0 only when every lesson\n"
        "ran without an error. The pages work offline; widgets show the text they saved.",
        epilog="examples:\n  python -m slurmlab.demo                     the whole course into build/demo/\n"
        "  python -m slurmlab.demo --lessons 03        one lesson, while preparing it\n"
        "  python -m slurmlab.demo --keep              leave the sandbox running for `make lab`",
    )
    parser.add_argument(
        "--profile",
        default=os.environ.get("SLURMLAB_PROFILE") or DEFAULT_PROFILE,
        help="the sandbox's hardware profile (env SLURMLAB_PROFILE; default %(default)s; "
        "`slurmlab sandbox profiles` lists them)",
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help="where the HTML pages and index.html go (default %(default)s)",
    )
    parser.add_argument(
        "--lessons",
        metavar="NN,NN",
        default=None,
        help="only these lessons, by number (e.g. 00,03); default: every lesson",
    )
    parser.add_argument(
        "--notebooks",
        metavar="DIR",
        default=None,
        help="the folder of the lessons (default: the repository's notebooks/)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running at the end")
    parser.add_argument(
        "--accounting",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Slurm accounting in the sandbox (sacct: the lessons' ended explanations); default: on "
        "where slurmdbd and MariaDB are installed; --no-accounting starts a few seconds sooner",
    )
    parser.add_argument(
        "--dir",
        dest="directory",
        default=None,
        metavar="DIR",
        help="the sandbox's folder (default: its usual place for the profile)",
    )
    parser.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the 2-node allocation that checks the sandbox before the lessons",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="how long one cell may run (default %(default)s s)",
    )
    return parser


def _lessons_folder(given: str | None) -> Path:
    if given:
        return Path(given)
    # a checkout keeps them beside the package; an installed wheel carries them inside it
    checkout = Path(__file__).resolve().parents[1] / "notebooks"
    return checkout if checkout.is_dir() else Path(__file__).resolve().parent / "notebooks"


def _plan(args: argparse.Namespace) -> list[Lesson]:
    """The lessons to run, checked before anything starts: a typo costs no sandbox."""
    lessons = discover(_lessons_folder(args.notebooks))
    if args.lessons is not None:
        lessons = select(lessons, parse_selection(args.lessons))
    if not lessons:
        raise SlurmlabError(
            f"no lessons (NN-name.ipynb) in {_lessons_folder(args.notebooks)}",
            hint="name the folder with --notebooks DIR",
        )
    for module in ("nbclient", "nbformat", "nbconvert"):
        require(module, feature="building the course", extra="course")
    return lessons


def _terminate(signum: int, frame: object) -> None:
    # `kill`, a closed terminal, a CI job cancelled: the same clean stop as Ctrl-C
    raise KeyboardInterrupt


def _course(sb: Sandbox, lessons: list[Lesson], args: argparse.Namespace) -> int:
    out = Path(args.out)
    print(
        f"\ncourse: {len(lessons)} lesson{'s' if len(lessons) != 1 else ''}, each in a fresh kernel "
        f"(one line as each ends)"
    )
    built = build_course(
        lessons,
        out,
        env={**os.environ, **sb.env()},
        profile=sb.profile_name,
        slurm=sb.release,
        cell_timeout=args.cell_timeout,
        echo=_echo,
    )
    passed = sum(r.ok for r in built.results)
    print(
        f"course: {passed} of {len(built.results)} lessons ran without an error; open {built.index.resolve()}"
    )
    return 0 if built.ok else 1


def _echo(line: str) -> None:
    print(line, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        lessons = _plan(args)
    except SlurmlabError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    try:
        sb = Sandbox.up(profile=args.profile, directory=args.directory, accounting=args.accounting)
    except SlurmlabError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("demo: interrupted while the sandbox started (it was stopped)", file=sys.stderr)
        return 130
    print(
        f"sandbox {sb.profile_name}: Slurm {sb.release}, {len(sb.nodes)} nodes ({', '.join(sb.nodes)}), "
        f"SLURM_CONF={sb.conf_path}" + (" (reused)" if sb.reused else "")
    )
    code = 0
    try:
        if not args.no_preflight:
            preflight(sb)
        code = _course(sb, lessons, args)
    except SlurmlabError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print(
            f"\ndemo: interrupted; the pages written so far are indexed in {Path(args.out) / 'index.html'}",
            file=sys.stderr,
        )
        code = 130
    finally:
        # an impatient second Ctrl-C must not leave the daemons half stopped
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if not args.keep and not sb.reused:
            sb.down()
            print(f"sandbox {sb.profile_name} is down; nothing left running")
        elif sb.reused:
            print(f"sandbox {sb.profile_name} was already running: left running as found")
        else:
            down = f"slurmlab sandbox down --dir {shlex.quote(str(sb.directory))}"
            print(f"sandbox {sb.profile_name} left running (--keep): `{down}` stops it")
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if code == 0:
        print(next_steps(args.profile, args.directory))
    return code


def next_steps(profile: str = DEFAULT_PROFILE, directory: str | None = None) -> str:
    """What a new user runs after the demo: the same sandbox (the profile and ``--dir`` the demo was given) in
    JupyterLab, or by hand."""
    where = "" if profile == DEFAULT_PROFILE else f" --profile {shlex.quote(profile)}"
    if directory is not None:
        where += f" --dir {shlex.quote(directory)}"
    # scripts/lab.py reads these (its own --dir is the notebooks' folder, not the sandbox's)
    lab = " ".join(
        [
            *([f"SLURMLAB_PROFILE={shlex.quote(profile)}"] if profile != DEFAULT_PROFILE else []),
            *([f"SLURMLAB_SANDBOX_DIR={shlex.quote(directory)}"] if directory is not None else []),
            "make lab",
        ]
    )
    env_where = f" --dir {shlex.quote(directory)}" if directory is not None else where
    rows = [
        (lab, "the sandbox and JupyterLab on the workshop notebooks, in"),
        ("", "one command; it prints the URL; Ctrl-C stops both"),
        (f".venv/bin/slurmlab sandbox up{where}", "start the sandbox again and leave it running"),
        (
            f'eval "$(.venv/bin/slurmlab sandbox env{env_where})"; sinfo',
            "use it from this shell with Slurm's own commands",
        ),
        (".venv/bin/jupyter lab notebooks/", "the workshop notebooks by hand; in one, `%load_ext slurmlab`"),
        ("", f"then `%slurm sandbox up{where}` and `%salloc --gpus=2 -t 10`"),
        (f".venv/bin/slurmlab sandbox down{env_where}", "stop it; nothing is left running"),
        (".venv/bin/slurmlab notebooks DIR", "copy the workshop notebooks into a folder of your own"),
    ]
    width = max(50, *(len(command) + 1 for command, _ in rows))
    return "\nnext:\n" + "\n".join(f"  {command:<{width}} {words}".rstrip() for command, words in rows)


# the lines after a demo on the default sandbox
NEXT_STEPS = next_steps()


if __name__ == "__main__":
    sys.exit(main())
