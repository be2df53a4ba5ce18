"""The sandbox folder: where it lives, and what ``Sandbox.up`` writes into it before a daemon starts
(sub-folders, slurm.conf and its siblings, the munge key, fake GPU device files)."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

from slurmlab.errors import SandboxError
from slurmlab.sandbox.profile import Profile
from slurmlab.sandbox.render import (
    HARDWARE_FILE,
    RenderContext,
    device_files,
    device_path,
    render_cgroup_conf,
    render_gres_conf,
    render_hardware_file,
    render_slurm_conf,
)
from slurmlab.sandbox.standin import STANDIN_DIR, TASK_PROLOG, nvidia_smi_script, task_prolog_script
from slurmlab.sandbox.state_file import STATE_FILE

__all__ = [
    "base_directory",
    "default_directory",
    "locate",
    "make_devices",
    "make_folders",
    "make_munge_key",
    "munge_socket_in",
    "write_configuration",
    "write_standins",
]

_UNIX_PATH_MAX = 107  # sun_path holds 108 bytes including the NUL


def base_directory() -> Path:
    """Where sandboxes live unless told: ``$XDG_RUNTIME_DIR/slurmlab/sandbox``, else ``~/.cache/...``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "slurmlab" / "sandbox"
    return Path.home() / ".cache" / "slurmlab" / "sandbox"


def default_directory(profile: str) -> Path:
    return base_directory() / profile


def locate(where: str | os.PathLike[str] | None) -> Path:
    """The folder of the sandbox ``where`` names: a folder, or a profile in the default place; with nothing
    given, the only sandbox recorded in the default place."""
    if where is None:
        base = base_directory()
        found = sorted(p.parent for p in base.glob(f"*/{STATE_FILE}")) if base.is_dir() else []
        if len(found) != 1:
            what = "no sandbox" if not found else f"{len(found)} sandboxes ({', '.join(map(str, found))})"
            raise SandboxError(
                f"{what} recorded under {base}",
                hint="start one with `slurmlab sandbox up`, or name it with --dir/--profile",
            )
        return found[0]
    text = os.fspath(where)
    path = Path(text)
    if os.sep not in text and not path.exists():
        path = default_directory(text)
    return path


def munge_socket_in(folder: Path) -> Path:
    """The munge socket of the sandbox in ``folder``; refused when the path is too long for a unix socket."""
    sock = folder / "munge" / "munged.sock"
    if len(str(sock)) > _UNIX_PATH_MAX:
        raise SandboxError(
            f"the sandbox folder {folder} is too deep for a unix socket path ({sock})",
            hint="choose a shorter --dir, e.g. /tmp/slurmlab-sandbox",
        )
    return sock


def make_folders(folder: Path, node_names: Sequence[str]) -> None:
    """The folder (open to enter, so admitted users reach the socket) and its sub-folders, one spool per node."""
    for sub in ("", "munge", "state", "log", "run", "dev", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    for node in node_names:
        (folder / "spool" / node).mkdir(exist_ok=True)


def write_configuration(folder: Path, prof: Profile, ctx: RenderContext) -> Path:
    """slurm.conf, gres.conf, the hardware file, the stand-in tools (:mod:`.standin`) and (where this machine
    needs one) cgroup.conf; the path of slurm.conf."""
    conf = folder / "slurm.conf"
    conf.write_text(render_slurm_conf(prof, ctx))
    (folder / "gres.conf").write_text(render_gres_conf(prof, ctx))
    (folder / HARDWARE_FILE).write_text(render_hardware_file(prof))
    write_standins(folder)
    cgroup_conf = render_cgroup_conf(ctx)
    if cgroup_conf is None:
        with contextlib.suppress(FileNotFoundError):
            (folder / "cgroup.conf").unlink()  # one left by an earlier sandbox on another machine setup
    else:
        (folder / "cgroup.conf").write_text(cgroup_conf)
    return conf


def write_standins(folder: Path) -> None:
    """``bin/nvidia-smi`` and ``bin/task-prolog``, runnable by every user the sandbox admits."""
    bin_dir = folder / STANDIN_DIR
    bin_dir.mkdir(exist_ok=True)
    bin_dir.chmod(0o755)
    for path, text in (
        (bin_dir / "nvidia-smi", nvidia_smi_script()),
        (folder / TASK_PROLOG, task_prolog_script(str(folder))),
    ):
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)


def make_munge_key(munge_dir: Path) -> None:
    """A random munge key, readable by its owner only; an existing one is kept."""
    key = munge_dir / "munge.key"
    if not key.exists():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(1024))
    key.chmod(0o400)


def make_devices(prof: Profile, ctx: RenderContext) -> None:
    """Fake GPU files: character devices (Slurm rejects plain files). mknod as root, else existing /dev/ttyN."""
    for dev in device_files(prof):
        path = Path(device_path(ctx, dev))
        if ctx.device_dir is None:
            if not path.exists() or not stat.S_ISCHR(path.stat().st_mode):
                raise SandboxError(
                    f"{path} is not a character device; without root the sandbox uses /dev/tty0.. as fake GPUs",
                    hint="run as root, or choose a profile with fewer GPUs per node (e.g. --profile seed)",
                )
            continue
        if path.exists() and stat.S_ISCHR(path.stat().st_mode):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(195, dev.number))
        except OSError as exc:
            raise SandboxError(
                f"cannot create the fake GPU device {path}: {exc}",
                hint="run as root, or as an ordinary user (the sandbox then uses /dev/ttyN)",
            ) from exc
