"""Record what ``why()`` asks a real Slurm in the scenes of issue 28, point 1 ("why it waits" gives advice that
is not true), for the unit tests of the panel's one estimate, of "sooner" and of the real cause named first.

    python scripts/record_why_waits.py 22.05
    bash scripts/in-slurm-root.sh 24.11 python scripts/record_why_waits.py 24.11

Starts a dgx-h100 sandbox without accounting (2 nodes × 8 GPUs) and, through the recording Runner of
``scripts/record_limits.py`` (every command's argv, exit code, stdout and stderr), records into
``tests/data/slurm/<version>/why_waits/``:

- ``g0*``: two jobs hold all 16 GPUs (8 on node1 for 30 minutes, 8 on node2 for 60); a job asking
  ``--gpus=1 -t 99999`` is asked why() at once, before Slurm has an estimate for it. ``g1*``: the same job
  once backfill gave it its expected start (what the panel's poll then shows).
- ``n0*`` / ``n1*``: the same for ``-N2 --gpus-per-node=8 -t 10`` (its ``-t 5`` change).
- ``b*``: a job submitted with ``--begin=now+10minutes``, held and released: why() right after the release,
  while Slurm's reason still says ``None`` (tried again until it does); ``bk*`` the doctor on it.
- ``<scene>x*``: where why() asked no ``sbatch --test-only`` (``g0``, ``n0``: Slurm has not looked at the job
  yet; ``b``: it waits for its begin time), what ``--test-only`` answers for the changes of its resources all
  the same (those drop its ``--begin``), as code before issue 28 asked them.
- ``i*``: the job ids before and after the g1 why(): each ``sbatch --test-only`` takes one (``i01``/``i02``
  are ``sbatch --hold`` submissions around it).

Paths are rewritten to /srv/sandbox and /home/user and the host name to ``vm``; ``commands.txt`` lists each
file with its argv and exit code (FakeRunner's ``recorded``)."""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Sequence

from _recording import DATA, REPO, emptied, sandbox, scratch, version_parser, write_commands
from record_limits import RecordingRunner, Sink, recorded_why, recording, submit

from slurmlab.core.diagnosis.alternatives import variants
from slurmlab.sandbox import Sandbox
from slurmlab.slurm.accounting_queries import qos_limits
from slurmlab.slurm.allocation.pending import PendingWhy
from slurmlab.slurm.doctor import doctor
from slurmlab.slurm.job_queries import list_jobs
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.runner import Runner


def _squeue(r: Runner, job: str, fmt: str) -> str:
    return r.run(["squeue", "-h", "-j", job, "-o", fmt], check=False).stdout.strip()


def _until(check: object, what: str, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise SystemExit(f"never: {what}")


def _why(sb: Sandbox, sink: Sink, prefix: str, job: str) -> PendingWhy:
    rec = recording(sb, sink, prefix)
    got = recorded_why(rec, job)
    if got.job is not None and not any(
        line.split("\t")[0].startswith(prefix) and "--test-only" in line for line in sink.lines
    ):
        # none asked (a job Slurm has not looked at yet, or that waits for its begin time): what --test-only
        # answers for the changes of its resources all the same, as code before issue 28 asked them
        sink.prefix, sink.n = prefix + "x", 0
        list_jobs(rec, all_users=True)  # that code listed the queue and read the limits first
        qos_limits(rec)
        for v in variants(got.job, list_nodes(rec), list_partitions(rec)):
            rec.run(["sbatch", "--test-only", "-o", "/dev/null", *v.options, "--wrap=true"], check=False)
    return got


def _scene(sb: Sandbox, sink: Sink, prefix: str, *options: str) -> str:
    """Submit the waiting job; why() at once (``<prefix>0``), then once Slurm has an expected start."""
    r = sb.runner(30.0)
    job = submit(r, *options)
    _why(sb, sink, prefix + "0", job)
    _until(lambda: _squeue(r, job, "%S") not in ("", "N/A"), f"an expected start for job {job}")
    _why(sb, sink, prefix + "1", job)
    return job


def _hold_submit(sb: Sandbox, sink: Sink, name: str) -> str:
    rec = RecordingRunner(slurm_conf=str(sb.conf_path), timeout=30.0)
    argv = ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"]
    res = rec.run(argv)
    sink.save(argv, res.returncode, res.stdout, res.stderr, name=name)
    rec.run(["scancel", res.stdout.strip()])
    return res.stdout.strip()


def _record(sb: Sandbox, sink: Sink) -> None:
    r = sb.runner(30.0)
    node1, node2 = sb.nodes[:2]
    a = submit(r, "--gpus=8", "-w", node1, "-t", "30", "-J", "holds-node1")
    b = submit(r, "--gpus=8", "-w", node2, "-t", "60", "-J", "holds-node2")
    _until(lambda: _squeue(r, f"{a},{b}", "%T").split() == ["RUNNING", "RUNNING"], "both holders running")
    g = _scene(sb, sink, "g", "--gpus=1", "-t", "99999", "-J", "long")
    _hold_submit(sb, sink, "i01_sbatch_hold.txt")
    _why(sb, sink, "i", g)  # the same why() once more, between two real submissions
    _hold_submit(sb, sink, "i02_sbatch_hold.txt")
    r.run(["scancel", g], check=False)
    n = _scene(sb, sink, "n", "-N2", "--gpus-per-node=8", "-t", "10", "-J", "two-nodes")
    r.run(["scancel", a, b, n], check=False)
    begin = submit(r, "--begin=now+10minutes", "-n1", "--gpus=1", "-t", "5", "-J", "later")
    for _ in range(20):  # until why() caught the moment after the release when Slurm's reason says None
        r.run(["scontrol", "hold", begin])
        r.run(["scontrol", "release", begin])
        mark = len(sink.lines)
        got = _why(sb, sink, "b", begin)
        if got.job is not None and got.job.reason in (None, "None"):
            break
        del sink.lines[mark:]
    else:
        raise SystemExit("Slurm's reason never said None after the release")
    print(doctor(recording(sb, sink, "bk"), job=begin).text())
    r.run(["scancel", begin], check=False)


def record(version: str) -> int:
    out = emptied(DATA / version / "why_waits")
    with scratch("slsb-why-") as base:
        rewrites = [
            (str(base / "sb"), "/srv/sandbox"),
            (str(REPO), "/home/user"),
            (socket.gethostname(), "vm"),
        ]
        sink = Sink(out, rewrites)
        sink.lines.append(
            f"# recorded by scripts/record_why_waits.py from a Slurm {version} sandbox (dgx-h100)"
        )
        with sandbox("dgx-h100", base / "sb", accounting=False) as sb:
            _record(sb, sink)
    write_commands(out, sink.lines)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return record(version_parser(__doc__, "why_waits").parse_args(argv).version)


if __name__ == "__main__":
    sys.exit(main())
