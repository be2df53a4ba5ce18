"""The CPU backend of the worker: spins on ``CLOCK_MONOTONIC`` and does NumPy fixed work.

Processes pinned to one core are time-sliced by the operating system, so the same logs,
Gantt and shares come out as on a shared GPU: a real measurement on any laptop.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# NumPy is imported where the timing work needs it: the identity alone (every task of a verify
# step prints one) then starts without it, which on a busy node is most of a task's start-up

CLOCK = "CLOCK_MONOTONIC"


def _percentiles(deltas: np.ndarray) -> dict[str, float]:
    import numpy as np

    p50, p99, p999 = np.percentile(deltas, [50.0, 99.0, 99.9])
    return {"loop_ns_median": float(p50), "loop_ns_p99": float(p99), "loop_ns_p999": float(p999)}


class CpuBackend:
    """Timer, interval logger, fixed work and copy bandwidth on the host CPU."""

    name = "cpu"
    clock = CLOCK

    def identity(self) -> dict[str, Any]:
        model = ""
        try:
            with open("/proc/cpuinfo") as fh:
                model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
        except OSError:
            pass
        return {
            "kind": "cpu",
            "hostname": socket.gethostname(),
            "cpu_model": model or platform.processor(),
            "cpu_count": os.cpu_count(),
            "devices": [],
        }

    def now(self) -> int:
        return time.monotonic_ns()

    def clock_offset_ns(self) -> int:
        """Epoch ns minus monotonic ns, read back to back (error ~ the read cost)."""
        best: tuple[int, int] | None = None
        for _ in range(64):
            a = time.time_ns()
            m = time.monotonic_ns()
            b = time.time_ns()
            if best is None or b - a < best[0]:
                best = (b - a, (a + b) // 2 - m)
        assert best is not None
        return best[1]

    def calibrate(self, seconds: float = 0.05) -> dict[str, Any]:
        """Tick and loop cost of the spin loop, and the clock's rate against the wall clock."""
        import numpy as np

        now = time.monotonic_ns
        reads: list[int] = []
        append = reads.append
        end = now() + int(seconds * 1e9)
        t = now()
        while t < end:
            t = now()
            append(t)
        d = np.diff(np.asarray(reads, dtype=np.int64))
        nonzero = d[d > 0]
        h0, m0 = time.time_ns(), now()
        time.sleep(0.05)
        h1, m1 = time.time_ns(), now()
        out = {
            "clock": CLOCK,
            "tick_ns": float(nonzero.min())
            if nonzero.size
            else float(time.get_clock_info("monotonic").resolution * 1e9),
            "reads": int(d.size + 1),
            "rate_vs_host": (m1 - m0) / (h1 - h0),
        }
        out.update(_percentiles(d))
        return out

    def choose_threshold(self, cal: dict[str, Any]) -> int:
        # well above the loop cost and its rare hiccups, well below an OS slice (ms)
        want = max(50 * cal["loop_ns_median"], 3 * cal["loop_ns_p999"], 20_000.0)
        return int(min(want, 500_000.0))

    def warm_up(self) -> None:
        self.log_runs(self.now(), self.now() + 2_000_000, 1_000_000, 16)

    def log_runs(self, start: int, end: int, threshold: int, capacity: int) -> tuple[list[int], int]:
        """Spin from ``start`` to ``end`` (clock ns); a jump over ``threshold`` ends a run.

        Returns the flat ``[s0, e0, s1, e1, ...]`` of the first ``capacity`` runs and the
        number of runs seen.
        """
        now = time.monotonic_ns
        t = now()
        while t < start:
            t = now()
        flat: list[int] = [t]
        append = flat.append
        prev = t
        while t < end:
            t = now()
            if t - prev > threshold:
                append(prev)
                append(t)
            prev = t
        append(prev)
        total = len(flat) // 2
        return flat[: 2 * capacity], total

    def fixed_work(self, iters: int, size: int = 1 << 16) -> dict[str, Any]:
        """``iters`` FMA steps (x = x*a + b) over ``size`` float64: the same work in every run."""
        import numpy as np

        x = np.linspace(0.0, 1.0, size)
        a, b = 0.999999, 1e-6
        t = time.perf_counter()
        for _ in range(iters):
            np.multiply(x, a, out=x)
            np.add(x, b, out=x)
        seconds = time.perf_counter() - t
        flops = 2.0 * size * iters
        return {
            "seconds": seconds,
            "flops": flops,
            "gflops": flops / seconds / 1e9,
            "checksum": float(x.sum()),
        }

    def copy_bandwidth(self, megabytes: int = 64, repeats: int = 5) -> dict[str, Any]:
        import numpy as np

        n = megabytes * (1 << 20) // 8
        src = np.ones(n)
        dst = np.empty_like(src)
        np.copyto(dst, src)
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            np.copyto(dst, src)
            best = min(best, time.perf_counter() - t)
        moved = 2 * src.nbytes  # read + write
        return {"bytes": moved, "seconds": best, "gbps": moved / best / 1e9, "counting": "read+write"}
