"""The CuPy backend of the worker: the CUDA kernels of ``kernels/`` on one GPU.

CuPy is imported when a :class:`CupyBackend` is made, never at module import. The logger's
clock is ``%globaltimer``, shared by every context on the GPU, so the runs of all processes
land on one axis.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from slurmlab._extras import require
from slurmlab.errors import SlurmlabError
from slurmlab.experiments.node.compile import kernel_source

CLOCK = "globaltimer"
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


def _uuid_text(raw: Any, prefix: str = "GPU") -> str | None:
    """cudaDeviceProp.uuid (16 bytes) in nvidia-smi's form; None when it is not 16 bytes."""
    try:
        data = bytes(raw) if not isinstance(raw, str) else raw.encode("latin-1")
    except (TypeError, ValueError):
        return None
    if len(data) != 16:
        return None
    h = data.hex()
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _bus_key(bus: str) -> str:
    """'00000000:18:00.0' (nvidia-smi) and '0000:18:00.0' (CUDA) -> '0000:18:00.0'."""
    dom, _, rest = bus.strip().lower().partition(":")
    return f"{dom[-4:].rjust(4, '0')}:{rest}"


def _local_cpulist(pci_bus_id: str) -> str | None:
    # sysfs names the device in lower case with a 4-digit domain
    try:
        return Path(f"/sys/bus/pci/devices/{_bus_key(pci_bus_id)}/local_cpulist").read_text().strip()
    except OSError:
        return None


def _nvidia_smi_clocks() -> dict[str, dict[str, Any]]:
    """PCI bus id -> uuid, clocks and compute mode from nvidia-smi, when it is there."""
    query = "pci.bus_id,uuid,clocks.sm,clocks.max.sm,clocks.applications.graphics,compute_mode"
    try:
        proc = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 6:
            continue

        def num(x: str) -> float | None:
            try:
                return float(x)
            except ValueError:
                return None

        out[_bus_key(cells[0])] = {
            "uuid": cells[1],
            "sm_mhz": num(cells[2]),
            "max_sm_mhz": num(cells[3]),
            "applications_mhz": num(cells[4]),
            "compute_mode": cells[5],
        }
    return out


class CupyBackend:
    """Timer, interval logger, FMA work and copy bandwidth on one GPU through CuPy."""

    name = "cupy"
    clock = CLOCK

    def __init__(self, device: int = 0) -> None:
        self.cp = require("cupy", feature="the GPU experiment worker", extra="gpu")
        if not self.cp.cuda.is_available():
            raise SlurmlabError(
                "CuPy sees no CUDA GPU here",
                hint="run on a GPU node (inside the allocation), or use --backend cpu",
            )
        self.device_index = device
        self.cp.cuda.Device(device).use()
        self.props = self.cp.cuda.runtime.getDeviceProperties(device)
        self.sms = int(self.props["multiProcessorCount"])
        self._module: Any = None

    # -- kernels ---------------------------------------------------------------------------------
    def _kernel(self, name: str) -> Any:
        if self._module is None:
            src = "\n".join(kernel_source(k) for k in ("timeslice_logger", "fma_work", "copy_bandwidth"))
            # clock_reader repeats the globaltimer helper inline, so it gets its own module
            self._module = {
                "main": self.cp.RawModule(code=src, options=("-std=c++17",)),
                "clock": self.cp.RawModule(code=kernel_source("clock_reader"), options=("-std=c++17",)),
            }
        mod = self._module["clock" if name == "clock_reader" else "main"]
        return mod.get_function(name)

    def _read_clock(self, n: int) -> np.ndarray:
        out = self.cp.zeros(n, dtype=self.cp.uint64)
        self._kernel("clock_reader")((1,), (1,), (out, np.int32(n)))
        reads: np.ndarray = self.cp.asnumpy(out).astype(np.int64)
        return reads

    # -- protocol --------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        rt = self.cp.cuda.runtime
        smi = _nvidia_smi_clocks()
        # MIG devices carry MIG UUIDs; CUDA_VISIBLE_DEVICES says which kind this task was given
        mig = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip().startswith("MIG-")
        devices = []
        for i in range(rt.getDeviceCount()):
            p = rt.getDeviceProperties(i)
            bus = rt.deviceGetPCIBusId(i)
            extra = smi.get(_bus_key(bus), {})
            uuid = _uuid_text(p.get("uuid"), "MIG" if mig else "GPU")
            if uuid is None and not mig:
                uuid = extra.get("uuid")
            name = p.get("name", b"?")
            mode = extra.get("compute_mode") or COMPUTE_MODES.get(int(p.get("computeMode", -1)), "?")
            devices.append(
                {
                    "index": i,
                    "name": name.decode(errors="replace") if isinstance(name, bytes) else str(name),
                    "uuid": uuid,
                    "pci_bus_id": bus,
                    "sms": int(p["multiProcessorCount"]),
                    "memory_total": int(p["totalGlobalMem"]),
                    "compute_capability": f"{p['major']}.{p['minor']}",
                    "compute_mode": mode,
                    "local_cpulist": _local_cpulist(bus),
                    "clocks": {k: v for k, v in extra.items() if k not in ("compute_mode", "uuid")},
                }
            )
        return {
            "kind": "gpu",
            "hostname": socket.gethostname(),
            "devices": devices,
            "child_visible_gpus": self._child_visible_gpus(),
            "overallocation": self._overallocation(),
        }

    def _child_visible_gpus(self) -> int | None:
        """How many GPUs a child sees with CUDA_VISIBLE_DEVICES removed (the device cgroup's view)."""
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        code = "import cupy; print(cupy.cuda.runtime.getDeviceCount())"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
            )
            return int(proc.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            return None

    def _overallocation(self) -> dict[str, Any]:
        free, total = self.cp.cuda.runtime.memGetInfo()
        tried = int(free) + (256 << 20)
        try:
            buf = self.cp.cuda.runtime.malloc(tried)
        except self.cp.cuda.runtime.CUDARuntimeError:
            return {"tried_bytes": tried, "failed": True, "total_bytes": int(total)}
        self.cp.cuda.runtime.free(buf)
        return {"tried_bytes": tried, "failed": False, "total_bytes": int(total)}

    def now(self) -> int:
        return int(self._read_clock(1)[0])

    def clock_offset_ns(self) -> int:
        """Epoch ns minus globaltimer ns; the tightest of several host brackets of one read."""
        best: tuple[int, int] | None = None
        for _ in range(20):
            a = time.time_ns()
            g = int(self._read_clock(1)[0])
            b = time.time_ns()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - g)
        assert best is not None
        return best[1]

    def calibrate(self) -> dict[str, Any]:
        reads = self._read_clock(8192)
        d = np.diff(reads)
        nonzero = d[d > 0]
        g0, h0 = self.now(), time.time_ns()
        time.sleep(0.2)
        g1, h1 = self.now(), time.time_ns()
        p50, p99, p999 = np.percentile(d, [50.0, 99.0, 99.9])
        return {
            "clock": CLOCK,
            "tick_ns": float(nonzero.min()) if nonzero.size else float("nan"),
            "tick_ns_median": float(np.median(nonzero)) if nonzero.size else float("nan"),
            "reads": int(reads.size),
            "loop_ns_median": float(p50),
            "loop_ns_p99": float(p99),
            "loop_ns_p999": float(p999),
            "rate_vs_host": (g1 - g0) / (h1 - h0),
        }

    def choose_threshold(self, cal: dict[str, Any]) -> int:
        # above the timer's update step and read cost, far below a ~1 ms GPU time slice
        tick = cal.get("tick_ns_median") or cal["tick_ns"]
        want = max(8 * float(tick), 50 * cal["loop_ns_median"], 4 * cal["loop_ns_p999"], 2_000.0)
        return int(min(want, 100_000.0))

    def warm_up(self) -> None:
        t = self.now()
        self.log_runs(t, t + 1_000_000, 10_000, 16)
        self.fixed_work(10)
        self.copy_bandwidth(1, repeats=1)

    def log_runs(self, start: int, end: int, threshold: int, capacity: int) -> tuple[list[int], int]:
        cp = self.cp
        runs = cp.zeros(2 * capacity, dtype=cp.uint64)
        count = cp.zeros(1, dtype=cp.uint64)
        self._kernel("timeslice_logger")(
            (1,), (1,),
            (np.uint64(start), np.uint64(end), np.uint64(threshold), runs, np.uint64(capacity), count),
        )  # fmt: skip
        cp.cuda.Device().synchronize()
        total = int(count.get()[0])
        kept = min(total, capacity)
        flat = cp.asnumpy(runs[: 2 * kept]).astype(np.int64).tolist()
        return flat, total

    def fixed_work(self, iters: int) -> dict[str, Any]:
        cp = self.cp
        blocks, threads = self.sms * 8, 256
        out = cp.empty(blocks * threads, dtype=cp.float32)
        begin, done = cp.cuda.Event(), cp.cuda.Event()
        t = time.perf_counter()
        begin.record()
        self._kernel("fma_work")(
            (blocks,), (threads,), (out, np.int32(iters), np.float32(0.999999), np.float32(1e-6))
        )
        done.record()
        done.synchronize()
        wall = time.perf_counter() - t
        seconds = cp.cuda.get_elapsed_time(begin, done) / 1e3
        flops = 2.0 * 8 * iters * blocks * threads
        return {"seconds": seconds, "wall_seconds": wall, "flops": flops, "tflops": flops / seconds / 1e12}

    def copy_bandwidth(self, megabytes: int, repeats: int = 5) -> dict[str, Any]:
        cp = self.cp
        n = megabytes * (1 << 20) // 16
        src = cp.ones(n * 4, dtype=cp.float32)
        dst = cp.empty_like(src)
        kernel = self._kernel("copy_bandwidth")
        blocks, threads = self.sms * 16, 256
        best = float("inf")
        for _ in range(max(repeats, 1)):
            begin, done = cp.cuda.Event(), cp.cuda.Event()
            begin.record()
            kernel((blocks,), (threads,), (src, dst, np.uint64(n)))
            done.record()
            done.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(begin, done) / 1e3)
        moved = 2 * n * 16
        return {"bytes": moved, "seconds": best, "gbps": moved / best / 1e9, "counting": "read+write"}
