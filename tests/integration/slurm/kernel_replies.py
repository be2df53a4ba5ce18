"""What a kernel printed for one execute request, from its iopub messages (shared by the kernel tests)."""

from __future__ import annotations

from typing import Any


def take(msg: dict[str, Any], msg_id: str, out: list[str]) -> str | None:
    """Add ``msg``'s output to ``out``; the whole output once the request is done, else None.

    An error reply fails the test with the kernel's traceback."""
    if msg["parent_header"].get("msg_id") != msg_id:
        return None
    kind, content = msg["msg_type"], msg["content"]
    if kind == "stream":
        out.append(content["text"])
    elif kind == "error":
        raise AssertionError("\n".join(content["traceback"]))
    elif kind == "status" and content["execution_state"] == "idle":
        return "".join(out)
    return None
