"""The program that samples an allocation's GPUs, run by the node's ``python3`` inside one overlapping step.

It is sent as ``python3 -c SAMPLER_SOURCE INTERVAL SECONDS GPUS_JSON`` (the probes' way: the node needs no
slurmlab, and nvidia-ml-py is imported there, never in the kernel). One task per node; each prints framed reports
(:mod:`slurmlab.core.framing`: a sample of eight GPUs passes the 1 KiB at which srun cuts a task's output):

- ``{"source": "nvml"|"nvidia-smi", "gpus": [uuids]}`` once it knows this job's GPUs, or ``{"error": "..."}``
  when it cannot sample them (then it ends);
- ``{"t": epoch, "node": N, "gpus": [{"index", "uuid", "util", "mem_used_mb", "mem_total_mb"}]}`` every INTERVAL
  seconds until SECONDS have passed or the step is ended.

Only THIS job's GPUs are read: the UUIDs Slurm put in ``CUDA_VISIBLE_DEVICES`` (``Flags=env_uuid``), else the
job's global indices on this node (``GPUS_JSON`` from ``scontrol show job -d``, else ``SLURM_STEP_GPUS`` /
``SLURM_JOB_GPUS``) matched against each device's minor number (``/dev/nvidiaN``, the files gres.conf names).
A device the step may not open (``ConstrainDevices``) is skipped; when nothing matches it says so and ends,
rather than show another job's GPUs. :mod:`slurmlab.core.gpu.usage` reads the lines.
"""

from __future__ import annotations

import json

from slurmlab.core.framing import FRAME_SOURCE

__all__ = ["SAMPLER_SOURCE", "sampler_command"]

SAMPLER_SOURCE = (
    FRAME_SOURCE
    + r'''
import json, os, subprocess, sys, time

def say(obj):
    print(frame(obj), flush=True)

def wanted(env, by_node):
    """(node, UUIDs, global indices) of this job's GPUs here."""
    node = env.get("SLURMD_NODENAME") or os.uname()[1]
    uuids = set(x.strip() for x in env.get("CUDA_VISIBLE_DEVICES", "").split(",")
                if x.strip().startswith(("GPU-", "MIG-")))
    idx = by_node.get(node)
    if idx is None:
        text = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or ""
        idx = [int(x) for x in text.split(",") if x.strip().isdigit()]
    return node, uuids, set(int(i) for i in idx)

def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)

def nvml_devices(nvml, uuids, idx):
    """[(index, uuid, handle)] of the job's GPUs that NVML can open here."""
    found = []
    for i in range(nvml.nvmlDeviceGetCount()):
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = _text(nvml.nvmlDeviceGetUUID(h))
            minor = nvml.nvmlDeviceGetMinorNumber(h)
        except Exception:
            continue  # a device this step may not open is not this job's
        if (uuid in uuids) if uuids else (minor in idx):
            found.append((minor, uuid, h))
    return found

def nvml_sample(nvml, node, devices):
    gpus = []
    for index, uuid, h in devices:
        util = nvml.nvmlDeviceGetUtilizationRates(h)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        gpus.append({"index": index, "uuid": uuid, "util": float(util.gpu),
                     "mem_used_mb": round(mem.used / 1048576, 1), "mem_total_mb": round(mem.total / 1048576, 1)})
    return {"t": time.time(), "node": node, "gpus": gpus}

def run_nvml(nvml, node, uuids, idx, interval, until):
    nvml.nvmlInit()
    try:
        devices = nvml_devices(nvml, uuids, idx)
        if not devices:
            say({"error": "none of this job's GPUs (%s) is visible to NVML on %s"
                 % (",".join(sorted(uuids)) or ",".join(map(str, sorted(idx))) or "none listed", node)})
            return
        say({"source": "nvml", "gpus": [d[1] for d in devices]})
        while time.time() < until:
            say(nvml_sample(nvml, node, devices))
            time.sleep(interval)
    finally:
        nvml.nvmlShutdown()

SMI_QUERY = "index,uuid,utilization.gpu,memory.used,memory.total"

def smi_row(line, uuids, idx):
    """One nvidia-smi CSV row as a GPU entry, or None when it is not one of this job's GPUs (or not a row)."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != 5 or not cells[0].isdigit():
        return None
    index, uuid = int(cells[0]), cells[1]
    if not ((uuid in uuids) if uuids else (index in idx)):
        return None
    try:
        util, used, total = (float(c) for c in cells[2:])
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"
    return {"index": index, "uuid": uuid, "util": util, "mem_used_mb": used, "mem_total_mb": total}

def run_smi(node, uuids, idx, interval, until):
    argv = ["nvidia-smi", "--query-gpu=" + SMI_QUERY, "--format=csv,noheader,nounits",
            "-lms", str(max(100, int(interval * 1000)))]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                encoding="utf-8", errors="replace")
    except OSError as exc:
        say({"error": "neither nvidia-ml-py nor nvidia-smi could be used on %s: %s" % (node, exc)})
        return
    said, batch, first = False, [], None
    try:
        for line in proc.stdout:
            row = smi_row(line, uuids, idx)
            if row is None:
                continue
            if first is not None and row["index"] == first:  # the next round begins: print the last one
                say({"t": time.time(), "node": node, "gpus": batch})
                batch = []
            if first is None:
                first = row["index"]
            if not said:
                say({"source": "nvidia-smi", "gpus": [row["uuid"]]})
                said = True
            batch.append(row)
            if time.time() >= until:
                break
    finally:
        proc.kill()
    if not said:
        say({"error": "nvidia-smi on %s listed none of this job's GPUs" % node})

def main(argv):
    interval, seconds = float(argv[0]), float(argv[1])
    by_node = json.loads(argv[2]) if len(argv) > 2 else {}
    node, uuids, idx = wanted(os.environ, by_node)
    if not uuids and not idx:
        say({"error": "no GPU of this job on %s (no GPU UUIDs or indices in the step)" % node})
        return
    until = time.time() + seconds
    try:
        import pynvml as nvml
    except Exception:
        nvml = None
    try:
        if nvml is not None:
            try:
                run_nvml(nvml, node, uuids, idx, interval, until)
                return
            except Exception as exc:
                if not hasattr(exc, "value"):  # not an NVMLError: a bug here, not a missing driver
                    raise
        run_smi(node, uuids, idx, interval, until)
    except (BrokenPipeError, KeyboardInterrupt):
        pass

if __name__ == "__main__":
    main(sys.argv[1:])
'''
)


def sampler_command(interval: float, seconds: float, gpus_by_node: dict[str, list[int]]) -> list[str]:
    """The step's command: the node's python3 running :data:`SAMPLER_SOURCE`."""
    return [
        "python3",
        "-c",
        SAMPLER_SOURCE,
        f"{interval:g}",
        f"{seconds:g}",
        json.dumps({node: list(idx) for node, idx in gpus_by_node.items()}, separators=(",", ":")),
    ]
