"""What a provisioned kernel asks Slurm for: the kernel spec's defaults, changed per kernel, as salloc tokens.

The kernel spec's ``metadata.kernel_provisioner.config`` holds the default request in named fields
(``gpus``, ``gpu_type``, ``shards``, ``mig``, ``time``, ``partition``, ``account``, ``options``); one kernel may
change any of them at its start: ``start_kernel(slurm_request={...})``, else the ``SLURMLAB_KERNEL_REQUEST``
variable of the kernel's environment (a JSON object of the same fields), else the notebook's own metadata
(``metadata.slurmlab.kernel_request``, the same object, read from the notebook jupyter_server starts the kernel
for). The tokens go through slurmlab's one request pipeline before anything is submitted. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from slurmlab.errors import RequestError

__all__ = [
    "FIELDS",
    "NOTEBOOK_KEY",
    "OVERRIDE_VARIABLE",
    "KernelRequest",
    "notebook_override",
    "request_from_config",
    "request_override",
]

OVERRIDE_VARIABLE = "SLURMLAB_KERNEL_REQUEST"
NOTEBOOK_KEY = ("slurmlab", "kernel_request")  # metadata.slurmlab.kernel_request of a notebook


@dataclass(frozen=True)
class KernelRequest:
    """The allocation a kernel runs in, in the words of the kernel spec (None: Slurm's default)."""

    gpus: int | None = None
    gpu_type: str | None = None
    shards: int | None = None  # a share of one GPU (``--gres=shard:N``) instead of whole GPUs
    mig: str | None = None  # a MIG profile, e.g. ``1g.10gb``: ``gpus`` slices of it
    time: int | None = None  # minutes
    partition: str | None = None
    account: str | None = None
    options: tuple[str, ...] = ()  # further salloc options, as tokens

    def tokens(self) -> list[str]:
        """The salloc options this request stands for (checked afterwards by the one request pipeline)."""
        out: list[str] = []
        kind = self.mig or self.gpu_type
        if self.gpus is not None or kind:
            count = 1 if self.gpus is None else self.gpus
            out.append(f"--gpus={kind}:{count}" if kind else f"--gpus={count}")
        if self.shards is not None:
            out.append(f"--gres=shard:{self.shards}")
        if self.time is not None:
            out.append(f"--time={self.time}")
        if self.partition:
            out.append(f"--partition={self.partition}")
        if self.account:
            out.append(f"--account={self.account}")
        return out + list(self.options)

    def changed(self, override: Mapping[str, object]) -> KernelRequest:
        """This request with the fields of ``override`` replaced (read as :func:`request_from_config` reads)."""
        return replace(self, **_fields_of(override, "the kernel's request"))

    def describe(self) -> str:
        """One line for a kernel spec's display name and the logs: ``2 GPUs (h100), 60 min, partition gpu``."""
        parts = []
        if self.mig:
            parts.append(f"{self.gpus or 1} × MIG {self.mig}")
        elif self.gpus is not None or self.gpu_type:
            count = 1 if self.gpus is None else self.gpus
            parts.append(
                f"{count} GPU{'s' if count != 1 else ''}" + (f" ({self.gpu_type})" if self.gpu_type else "")
            )
        if self.shards is not None:
            parts.append(f"{self.shards} GPU shard{'s' if self.shards != 1 else ''}")
        if self.time is not None:
            parts.append(f"{self.time} min")
        if self.partition:
            parts.append(f"partition {self.partition}")
        if self.account:
            parts.append(f"account {self.account}")
        if self.options:
            parts.append(" ".join(self.options))
        return ", ".join(parts) or "Slurm's defaults"

    def to_config(self) -> dict[str, object]:
        """The fields that are set, as a kernel spec's provisioner config holds them."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value != ():
                out[f.name] = list(value) if f.name == "options" else value
        return out


FIELDS = tuple(f.name for f in fields(KernelRequest))
_COUNTS = ("gpus", "shards", "time")
_WORDS = ("gpu_type", "mig", "partition", "account")


def request_from_config(config: Mapping[str, object]) -> KernelRequest:
    """The request of a kernel spec's provisioner config; a RequestError names every field that is wrong."""
    return KernelRequest(**_fields_of(config, "the kernel spec's request"))


def request_override(text: str | None, given: object = None) -> dict[str, object]:
    """What one kernel changes: ``given`` (``start_kernel(slurm_request=...)``: a mapping), else ``text`` (the
    ``SLURMLAB_KERNEL_REQUEST`` variable: a JSON object); empty when neither is set."""
    if given is not None:
        if not isinstance(given, Mapping):
            raise RequestError(
                f"slurm_request must be a mapping of request fields, not {type(given).__name__}",
                hint=f"e.g. slurm_request={{'gpus': 2, 'time': 30}}; fields: {', '.join(FIELDS)}",
            )
        return dict(given)
    if not text or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestError(
            f"{OVERRIDE_VARIABLE} is not JSON ({exc.msg} at character {exc.pos})",
            hint=f'set it to a JSON object, e.g. {OVERRIDE_VARIABLE}=\'{{"gpus": 2, "time": 30}}\'',
        ) from None
    if not isinstance(value, dict):
        raise RequestError(
            f"{OVERRIDE_VARIABLE} must be a JSON object, not {type(value).__name__}",
            hint=f'e.g. {OVERRIDE_VARIABLE}=\'{{"gpus": 2, "time": 30}}\'',
        )
    return value


def notebook_override(text: str, where: str) -> dict[str, object]:
    """What a notebook's ``metadata.slurmlab.kernel_request`` changes (empty when it has none, or when ``text``
    is not a notebook at all: a kernel is not refused for a file it was not asked about). ``where`` names the
    notebook in the error of a request that is not an object."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError:
        return {}
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    ours = metadata.get(NOTEBOOK_KEY[0]) if isinstance(metadata, dict) else None
    value = ours.get(NOTEBOOK_KEY[1]) if isinstance(ours, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestError(
            f"{where}: metadata.slurmlab.kernel_request must be an object, not {type(value).__name__}",
            hint='e.g. "kernel_request": {"gpus": 2, "time": 30} in the notebook\'s metadata',
        )
    return value


def _fields_of(config: Mapping[str, object], where: str) -> dict[str, Any]:
    problems: list[str] = []
    out: dict[str, Any] = {}
    for name, value in config.items():
        if name not in FIELDS:
            problems.append(f"unknown field {name!r}")
        elif value is None:
            out[name] = None
        elif name in _COUNTS:
            out[name] = _count(name, value, problems)
        elif name in _WORDS:
            out[name] = _word(name, value, problems)
        else:
            out[name] = _tokens(value, problems)
    if problems:
        raise RequestError(
            f"{where} is wrong: " + "; ".join(problems),
            hint=f"fields: {', '.join(FIELDS)} (counts and minutes are whole numbers, options a list of tokens)",
        )
    return out


def _count(name: str, value: object, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        problems.append(f"{name} must be a whole number, not {value!r}")
        return None
    try:
        number = int(value)
    except ValueError:
        problems.append(f"{name} must be a whole number, not {value!r}")
        return None
    if number < 0 or (name == "time" and number == 0):
        problems.append(f"{name} must be {'positive' if name == 'time' else 'zero or more'}, not {number}")
        return None
    return number


def _word(name: str, value: object, problems: list[str]) -> str | None:
    if (
        not isinstance(value, str)
        or not value.strip()
        or any(c.isspace() or c in ",=" for c in value.strip())
    ):
        problems.append(f"{name} must be one name without spaces, commas or '=', not {value!r}")
        return None
    return value.strip()


def _tokens(value: object, problems: list[str]) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(t, str) for t in value)
    ):
        problems.append(f"options must be a list of salloc tokens, e.g. ['--constraint=a100'], not {value!r}")
        return ()
    return tuple(value)
