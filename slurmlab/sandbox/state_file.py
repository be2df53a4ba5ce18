"""The sandbox's ``state.json`` (pids, ports, profile, version, conf path), which ``status``/``down``/``env``
and other processes read: read strictly, re-read quietly, written atomically."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from slurmlab.errors import SandboxError

__all__ = ["STATE_FILE", "read_state", "reread_state", "write_state"]

STATE_FILE = "state.json"


def read_state(directory: Path) -> dict[str, Any]:
    """The state of the sandbox in ``directory``; a SandboxError that says what to do when there is none."""
    file = directory / STATE_FILE
    try:
        state = json.loads(file.read_text())
    except FileNotFoundError:
        raise SandboxError(
            f"no sandbox in {directory} (no {STATE_FILE})",
            hint=f"start one: slurmlab sandbox up --dir {directory}",
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise SandboxError(
            f"cannot read {file}: {exc}", hint=f"remove the folder {directory} and start again"
        ) from exc
    if not isinstance(state, dict) or not {"profile", "pids", "conf_path"} <= state.keys():
        raise SandboxError(f"{file} is not a sandbox state file", hint=f"remove {directory} and start again")
    return state


def reread_state(directory: Path) -> dict[str, Any] | None:
    """The state as it is now, or None when it cannot be read (then the caller keeps what it has)."""
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((directory / STATE_FILE).read_text())
        if isinstance(state, dict) and isinstance(state.get("pids"), dict):
            return state
    return None


def write_state(directory: Path, state: dict[str, Any]) -> None:
    """Replace the state in one step, so that a reader never sees half a file."""
    tmp = directory / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(directory / STATE_FILE)
