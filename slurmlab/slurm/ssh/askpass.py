"""ssh's prompts (passphrase, password, one-time code) answered by the person at the notebook.

ssh runs ``SSH_ASKPASS`` with the prompt as its argument and reads the answer from its stdout
(``SSH_ASKPASS_REQUIRE=force``: even where a terminal exists). That program is this file, run on its own
(stdlib only): it hands the prompt to the kernel through a Unix socket in the user's private 0700 folder, where
:class:`Listener` asks ``ask(prompt)`` in the thread that is connecting (a notebook's password field needs the
cell's thread) and sends the answer back. The answer lives in memory only: no file, no log, no environment.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

__all__ = ["SOCKET_VARIABLE", "Listener", "environment"]

SOCKET_VARIABLE = "SLURMLAB_ASKPASS_SOCKET"
_END = b"\0"  # ends a prompt; an answer ends when the listener closes the connection
_NO_ANSWER = b"\1"  # the person gave none (cancelled): ssh is told so by a failing askpass
_PROMPT_LIMIT = 4096


def _program(folder: Path) -> str:
    """The askpass program in ``folder`` (ssh takes a path, no arguments): this file run by this Python."""
    path = folder / "askpass"
    text = f"#!/bin/sh\nexec '{sys.executable}' -I -S '{os.path.abspath(__file__)}' \"$@\"\n"
    if not path.exists() or path.read_text() != text:
        tmp = folder / f"askpass.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(0o700)
        tmp.replace(path)
    return str(path)


def environment(socket_path: str) -> dict[str, str]:
    """The variables that send ssh's prompts to a :class:`Listener` on ``socket_path``."""
    return {
        "SSH_ASKPASS": _program(Path(socket_path).parent),
        "SSH_ASKPASS_REQUIRE": "force",
        SOCKET_VARIABLE: socket_path,
    }


class Listener:
    """Answers the askpass program's prompts with ``ask`` while ssh logs in."""

    def __init__(self, path: str, ask: Callable[[str], str]) -> None:
        self.path, self.ask = path, ask
        self.prompts: list[str] = []  # what was asked (never the answers)
        self._sock: socket.socket | None = None

    def __enter__(self) -> Listener:
        Path(self.path).unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        sock.listen(2)
        self._sock = sock
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._sock is not None:
            self._sock.close()
        Path(self.path).unlink(missing_ok=True)

    def serve_until(self, proc: subprocess.Popen[bytes], timeout: float) -> int | None:
        """Answer prompts until ``proc`` ends; its exit status, or None when it ran past ``timeout`` (killed)."""
        assert self._sock is not None
        end = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > end:
                proc.kill()
                proc.wait()
                return None
            ready, _, _ = select.select([self._sock], [], [], 0.1)
            if ready:
                conn, _ = self._sock.accept()
                with conn:
                    self._answer(conn)
        return proc.returncode

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        while not data.endswith(_END) and len(data) < _PROMPT_LIMIT:
            chunk = conn.recv(1024)
            if not chunk:
                return
            data += chunk
        prompt = data.rstrip(_END).decode("utf-8", "replace")
        self.prompts.append(prompt)
        try:
            answer = self.ask(prompt)
        except (KeyboardInterrupt, EOFError):
            conn.sendall(_NO_ANSWER)
            return
        conn.sendall(answer.encode("utf-8"))


def _main(argv: list[str]) -> int:
    """The askpass program: ask the kernel, print the answer for ssh."""
    path = os.environ.get(SOCKET_VARIABLE)
    if not path:
        return 1
    prompt = (argv[1] if len(argv) > 1 else "Password: ").encode("utf-8", "replace")[: _PROMPT_LIMIT - 1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(prompt + _END)
        parts = []
        while chunk := sock.recv(4096):
            parts.append(chunk)
    answer = b"".join(parts)
    if answer == _NO_ANSWER:
        return 1
    sys.stdout.buffer.write(answer + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
