"""One kernel started by jupyter_client through a provisioner, as a Jupyter server would: the driver of
benchmarks/bench_provisioner.py (run by it, in the provisioner's own environment).

    python _provisioner_driver.py KERNEL_NAME [--hold]

Prints one JSON object a line, each with ``t`` (``time.time()``): ``log`` (what the provisioner logged),
``status`` (what the manager can read of the kernel's state, when it changes), ``started`` (``start_kernel``
returned), ``ready`` (the first execute reply, with what the cell printed), ``error``, ``shutdown``. With
``--hold`` it keeps the kernel after ``ready`` until it is killed (the forced server stop). Imports nothing
but jupyter_client and the standard library: the other provisioner's environment has no slurmlab.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

LINGER_S = 15.0  # FZJ's provisioner cancels an allocation 10 s after the kernel's end, in a task of the loop
CELL = "import os; print(os.environ.get('SLURM_JOB_ID'), os.environ.get('SLURM_STEP_ID'))"


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


class Relay(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception as exc:  # a provisioner's malformed log call must not end the driver
            text = f"{record.msg!r} ({exc})"
        emit("log", level=record.levelname, text=text)


def stand_in_for_the_site(site: dict[str, Any]) -> None:
    """What FZJ's provisioner takes from its site (the Juelich Supercomputing Centre), given by the sandbox:
    ``/usr/libexec/jutil-exe env activate -p PROJECT`` (JSC's tool printing the project's budget account as
    ``export BUDGET_ACCOUNTS=...;``) answers the sandbox's account, and the node names resolve to their NodeAddr
    (what DNS or /etc/hosts does on a cluster). Everything else runs as FZJ's code has it."""
    import socket
    import subprocess

    check_output, resolve = subprocess.check_output, socket.gethostbyname

    def site_check_output(argv: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(argv, list) and argv[:1] == ["/usr/libexec/jutil-exe"]:
            return f"export BUDGET_ACCOUNTS={site['account']};".encode()
        return check_output(argv, *args, **kwargs)

    def site_gethostbyname(name: str) -> str:
        return str(site["hosts"].get(name) or resolve(name))

    subprocess.check_output = site_check_output  # type: ignore[assignment]
    socket.gethostbyname = site_gethostbyname


def status_text(km: Any) -> str:
    """What the manager can read of the provisioner's state: slurmlab's ``status.message``; FZJ's ``state``
    attribute and the state it keeps for its frontend extension (``slurm_provisioner.json`` in the runtime
    folder under $HOME)."""
    prov = km.provisioner
    if prov is None:
        return ""
    status = getattr(prov, "status", None)
    if status is not None and hasattr(status, "message"):
        return f"{status.phase}: {status.message}"
    said = [f"state={getattr(prov, 'state', '')!r}"]
    store = Path(os.environ.get("HOME", "")) / ".local/share/jupyter/runtime/slurm_provisioner.json"
    try:
        kept = json.loads(store.read_text())
    except (OSError, ValueError):
        kept = {}
    for job, entry in kept.items():
        said.append(f"job {job}: {entry.get('state')}")
    return ", ".join(said)


async def run(kernel_name: str, hold: bool) -> int:
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir

    # named beforehand, as jupyter_server's MultiKernelManager does (FZJ's provisioner puts the name on srun's
    # command line before it writes the file; a bare KernelManager names it only when it writes it)
    kernel_id = str(uuid.uuid4())
    runtime = Path(jupyter_runtime_dir())
    runtime.mkdir(parents=True, exist_ok=True)
    km = AsyncKernelManager(
        kernel_name=kernel_name, connection_file=str(runtime / f"kernel-{kernel_id}.json")
    )
    km.log.setLevel(logging.INFO)
    km.log.addHandler(Relay())
    emit("begin", pid=os.getpid())
    start = asyncio.ensure_future(km.start_kernel(kernel_id=kernel_id))
    said = None
    while not start.done():
        now = status_text(km)
        if now != said:
            emit("status", text=now)
            said = now
        await asyncio.sleep(0.2)
    try:
        start.result()
    except Exception as exc:
        emit("error", where="start_kernel", text=f"{type(exc).__name__}: {exc}")
        return 1
    emit("started", status=status_text(km))
    kc = km.client()
    kc.start_channels()
    printed: list[str] = []

    def output(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    try:
        await kc.wait_for_ready(timeout=120)
        reply = await kc.execute_interactive(CELL, timeout=60, output_hook=output)
    except Exception as exc:
        emit("error", where="first cell", text=f"{type(exc).__name__}: {exc}")
        return 1
    emit("ready", reply=reply["content"]["status"], printed="".join(printed).strip(), status=status_text(km))
    if hold:
        await asyncio.sleep(3600)
    kc.stop_channels()
    await km.shutdown_kernel()
    emit("shutdown", status=status_text(km))
    # a Jupyter server's loop runs on after a shutdown: tasks a provisioner left behind get their time
    await asyncio.sleep(LINGER_S)
    emit("exit", status=status_text(km))
    return 0


def main() -> int:
    hold = "--hold" in sys.argv[2:]
    site = os.environ.get("BENCH_PROVISIONER_SITE")
    if site:
        stand_in_for_the_site(json.loads(site))
    return asyncio.run(run(sys.argv[1], hold))


if __name__ == "__main__":
    sys.exit(main())
