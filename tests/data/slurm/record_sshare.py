"""Record ``sshare`` (fair-share) output from a real sandbox with accounting, for the parser's tests.

    python tests/data/slurm/record_sshare.py 22.05
    bash scripts/in-slurm-root.sh 24.11 python tests/data/slurm/record_sshare.py 24.11
    python tests/data/slurm/record_sshare.py 22.05 --off      (a sandbox without accounting)

Writes ``a*_sshare_*.txt`` (stdout, and ``.stderr`` when it printed any) into ``tests/data/slurm/<version>/sshare/``
and lists each command with its exit code in its ``commands.txt`` (the layout FakeRunner's ``recorded`` reads). Usage is charged to an association by the priority plugin's decay
thread (every ``PriorityCalcPeriod``), so the sandbox is reconfigured to a one-minute period and the recording
waits until this user's usage is above zero.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "scripts"))  # _recording: what the recorders share

from _recording import sandbox, scratch, version_parser, write_commands  # noqa: E402

from slurmlab.core.slurm.sshare import SSHARE_FIELDS  # noqa: E402
from slurmlab.sandbox import Sandbox  # noqa: E402

FORMAT = ",".join(SSHARE_FIELDS)


def record_off(version: str) -> int:
    """sshare on a sandbox without accounting: what "accounting is off" looks like."""
    out_dir = HERE / version / "sshare"
    with (
        scratch("slsb-rec-", mode=0o700) as base,
        sandbox("seed", base / "sb", nodes=1, accounting=False) as sb,
    ):
        res = subprocess.run(
            ["sshare", "--parsable2", "--noheader", "--format", FORMAT],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **sb.env()},
            cwd="/",
        )
    name = "a07_sshare_accounting_off"
    (out_dir / f"{name}.txt").write_text(res.stdout)
    if res.stderr:
        (out_dir / f"{name}.stderr").write_text(res.stderr)
    with (out_dir / "commands.txt").open("a") as log:
        log.write(f"{name}.txt\trc={res.returncode}\tsshare --parsable2 --noheader --format {FORMAT}\n")
    print(name, res.returncode, res.stdout, res.stderr)
    return 0


def record_scenes(sb: Sandbox, out_dir: Path) -> list[str]:
    """The scenes into ``out_dir``; the lines of its commands.txt."""
    env = {**os.environ, **sb.env()}
    log = [
        "# sshare recorded by tests/data/slurm/record_sshare.py from a sandbox with accounting (seed, 2 nodes)"
    ]

    def run(name: str, *argv: str, record: bool = True) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env, cwd="/")
        if record:
            (out_dir / f"{name}.txt").write_text(res.stdout)
            if res.stderr:
                (out_dir / f"{name}.stderr").write_text(res.stderr)
            log.append(f"{name}.txt\trc={res.returncode}\t{' '.join(argv)}")
        return res

    with sb.conf_path.open("a") as conf:
        conf.write("PriorityCalcPeriod=1\n")
    run("", "scontrol", "reconfigure", record=False)
    run("a00_sshare_zero_usage", "sshare", "--parsable2", "--noheader", "--format", FORMAT)
    # GPU-minutes are whole minutes: enough GPU-seconds that the research account's usage shows
    for account, gpus in (("research", 4), ("research", 3), ("teaching", 1)):
        run(
            "",
            "sbatch",
            "-A",
            account,
            f"--gres=gpu:{gpus}",
            "-c",
            "4",
            "-t",
            "2",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 40",
            record=False,
        )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        res = run("", "sshare", "--parsable2", "--noheader", "-U", "--format", "GrpTRESRaw", record=False)
        if any("gres/gpu=" in v and "gres/gpu=0" not in v for v in res.stdout.split()):
            break
        time.sleep(5)
    run("a01_sshare_mine", "sshare", "--parsable2", "--noheader", "--format", FORMAT)
    run("a02_sshare_all", "sshare", "--parsable2", "--noheader", "-a", "--format", FORMAT)
    run("a03_sshare_default_header", "sshare", "--parsable2")
    run("a04_sshare_long", "sshare", "-l")
    run("a05_sshare_helpformat", "sshare", "--helpformat")
    run(
        "a06_sshare_unknown_account",
        "sshare",
        "--parsable2",
        "--noheader",
        "-A",
        "nosuch",
        "--format",
        FORMAT,
    )
    return log


def record_on(version: str) -> int:
    """sshare on a sandbox with accounting, once this user's usage shows."""
    out_dir = HERE / version / "sshare"
    out_dir.mkdir(parents=True, exist_ok=True)
    with (
        scratch("slsb-rec-") as base,
        sandbox("seed", base / "sb", nodes=2, accounting=True) as sb,
    ):
        log = record_scenes(sb, out_dir)
    write_commands(out_dir, log)
    print("\n".join(log))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    epilog = (
        "It starts its own sandbox (minutes) and writes over the files of the same names; with --off it adds "
        "a07_sshare_accounting_off and its line in commands.txt."
    )
    ap = version_parser(__doc__, "sshare", epilog)
    ap.add_argument("--off", action="store_true", help="a sandbox without accounting")
    args = ap.parse_args(argv)
    return record_off(args.version) if args.off else record_on(args.version)


if __name__ == "__main__":
    sys.exit(main())
