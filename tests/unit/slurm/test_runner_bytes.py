"""Bytes that are not UTF-8 in what a command prints (another user's job name, a step's output) are read by the
one runner without an error and without losing a line: each such byte shows as U+FFFD."""

from __future__ import annotations

import asyncio
import sys

from slurmlab.slurm.runner import Runner
from slurmlab.slurm.steps import stream_step

# a job name with a byte that is not UTF-8, then a line after it that must not be lost
PRINTS_BAD_BYTES = (
    "import sys; sys.stdout.buffer.write(b'JobId=7 JobName=bad\\xff\\n   UserId=x(1)\\n'); "
    "sys.stderr.buffer.write(b'warn \\xfe\\n'); sys.stdout.buffer.write(b'after\\n')"
)


def test_run_reads_bytes_that_are_not_utf8() -> None:
    result = Runner(munge_probe_after=0).run([sys.executable, "-c", PRINTS_BAD_BYTES])
    assert result.stdout.splitlines() == ["JobId=7 JobName=bad\ufffd", "   UserId=x(1)", "after"]
    assert result.stderr == "warn \ufffd\n"


def test_arun_reads_bytes_that_are_not_utf8() -> None:
    result = asyncio.run(Runner(munge_probe_after=0).arun([sys.executable, "-c", PRINTS_BAD_BYTES]))
    assert result.stdout.splitlines() == ["JobId=7 JobName=bad\ufffd", "   UserId=x(1)", "after"]
    assert result.stderr == "warn \ufffd\n"


def test_a_streamed_step_keeps_every_line_after_a_bad_byte() -> None:
    seen: list[tuple[str, str]] = []
    argv = [
        sys.executable,
        "-c",
        "import sys; sys.stdout.buffer.write(b'a\\xffb\\n'); print('after'); sys.exit(3)",
    ]
    result = stream_step(
        Runner(munge_probe_after=0), argv, lambda stream, line: seen.append((stream, line)), 30
    )
    assert ("stdout", "a\ufffdb") in seen and ("stdout", "after") in seen
    assert result.stdout == ["a\ufffdb", "after"]
    assert result.returncode == 3


def test_popen_reads_bytes_that_are_not_utf8() -> None:
    proc = Runner(munge_probe_after=0).popen([sys.executable, "-c", PRINTS_BAD_BYTES], merge_stderr=True)
    with proc:
        out, _ = proc.communicate(timeout=30)
    assert "JobName=bad\ufffd" in out and "after" in out and "warn \ufffd" in out
