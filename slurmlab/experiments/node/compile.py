"""Compile the CUDA kernels shipped in ``kernels/`` — with nvcc or with NVRTC.

Compiling needs no GPU, so the kernels are checked on any machine with nvcc or the
``nvidia-cuda-nvrtc`` wheel. Warnings are errors: a kernel that compiles with a warning
is treated as broken, since its timing would be suspect.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from slurmlab._extras import require
from slurmlab.errors import KernelCompileError

KERNELS: dict[str, str] = {
    "timeslice_logger": "timeslice_logger.cu",
    "clock_reader": "clock_reader.cu",
    "fma_work": "fma_work.cu",
    "copy_bandwidth": "copy_bandwidth.cu",
}
ARCHS = ("sm_80", "sm_90")


def kernel_source(name: str) -> str:
    """The CUDA source of kernel ``name`` (one of :data:`KERNELS`)."""
    if name not in KERNELS:
        raise KernelCompileError(f"unknown kernel {name!r}", hint=f"choose one of {', '.join(KERNELS)}")
    return (resources.files("slurmlab.experiments.node") / "kernels" / KERNELS[name]).read_text()


def _check_arch(arch: str) -> None:
    if not (arch.startswith("sm_") and arch[3:].isdigit()):
        raise KernelCompileError(
            f"bad GPU architecture {arch!r}", hint="use e.g. sm_80 (A100) or sm_90 (H100/H200)"
        )


def find_nvcc() -> str | None:
    """nvcc on PATH, else the usual CUDA install places."""
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"):
        if Path(cand).is_file():
            return cand
    return None


def compile_nvcc(name: str, arch: str = "sm_90", *, nvcc: str | None = None, timeout: float = 120.0) -> bytes:
    """Compile kernel ``name`` to a cubin with ``nvcc -arch=ARCH -cubin``; warnings are errors."""
    _check_arch(arch)
    exe = nvcc or find_nvcc()
    if exe is None:
        raise KernelCompileError("nvcc was not found", hint="install the CUDA toolkit or put nvcc on PATH")
    src = kernel_source(name)
    with tempfile.TemporaryDirectory(prefix="slurmlab-nvcc-") as tmp:
        cu = Path(tmp) / KERNELS[name]
        cu.write_text(src)
        out = Path(tmp) / f"{name}.cubin"
        argv = [exe, f"-arch={arch}", "-cubin", "--Werror", "all-warnings", "-o", str(out), str(cu)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise KernelCompileError(f"nvcc ran past {timeout:.0f} s compiling {name}") from exc
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0 or log:
            raise KernelCompileError(
                f"nvcc failed on {name} for {arch} (exit {proc.returncode}): {log or 'no message'}",
                hint="fix the kernel source in slurmlab/experiments/node/kernels/",
            )
        return out.read_bytes()


def compile_nvrtc(name: str, arch: str = "sm_90") -> bytes:
    """Compile kernel ``name`` to a cubin through ``cupy.cuda.nvrtc``; any log text fails it."""
    _check_arch(arch)
    cupy = require("cupy", feature="compiling CUDA kernels with NVRTC", extra="gpu")
    nvrtc = cupy.cuda.nvrtc
    src = kernel_source(name)
    prog = nvrtc.createProgram(src, KERNELS[name], [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"-arch={arch}"])
        except nvrtc.NVRTCError as exc:
            log = nvrtc.getProgramLog(prog)
            raise KernelCompileError(f"NVRTC failed on {name} for {arch}: {log or exc}") from exc
        log = nvrtc.getProgramLog(prog).strip().strip("\x00")
        if log:
            raise KernelCompileError(f"NVRTC warned on {name} for {arch}: {log}")
        return bytes(nvrtc.getCUBIN(prog))
    finally:
        nvrtc.destroyProgram(prog)
